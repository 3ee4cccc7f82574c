package framework

import (
	"bufio"
	"os"
	"regexp"
	"strings"
	"time"
)

var logTime = regexp.MustCompile(`(?:^|\s)(?:time|ts)=(\S+)`)

// LogLineTime returns the time of the first line of a logfmt log that contains all of subs.
func LogLineTime(path string, subs ...string) (time.Time, bool) {
	f, err := os.Open(path)
	if err != nil {
		return time.Time{}, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
next:
	for sc.Scan() {
		line := sc.Text()
		for _, s := range subs {
			if !strings.Contains(line, s) {
				continue next
			}
		}
		if m := logTime.FindStringSubmatch(line); m != nil {
			if t, err := time.Parse(time.RFC3339Nano, strings.Trim(m[1], `"`)); err == nil {
				return t, true
			}
		}
	}
	return time.Time{}, false
}
