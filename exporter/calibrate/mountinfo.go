package calibrate

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

// mount is what calibration reads of one line of a mount table (proc(5)).
type mount struct {
	point  string
	root   string // the folder of its filesystem mounted here: a bind's source
	fsType string
	upper  string // an overlay's upperdir
}

// readMountInfo reads the process's own mount table, or the file a test names.
func readMountInfo(path string) ([]mount, error) {
	if path == "" {
		path = "/proc/self/mountinfo"
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading the mount table: %w", err)
	}
	defer f.Close()
	var mounts []mount
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20) // lowerdir lists of many layers make long lines
	for sc.Scan() {
		// 36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields, super := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(super) < 3 {
			continue
		}
		m := mount{root: unescape(fields[3]), point: unescape(fields[4]), fsType: super[0]}
		if m.fsType == "overlay" {
			for _, opt := range strings.Split(super[2], ",") {
				if v, ok := strings.CutPrefix(opt, "upperdir="); ok {
					m.upper = unescape(v)
				}
			}
		}
		mounts = append(mounts, m)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the mount table: %w", err)
	}
	return mounts, nil
}

// mountAt is the mount at point: the last one, which hides those before it.
func mountAt(mounts []mount, point string) (mount, bool) {
	for i := len(mounts) - 1; i >= 0; i-- {
		if mounts[i].point == point {
			return mounts[i], true
		}
	}
	return mount{}, false
}

// unescape undoes the octal escapes (\040 for a space) of a mountinfo field.
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1:i+4]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(s string) bool {
	for i := range len(s) {
		if s[i] < '0' || s[i] > '7' {
			return false
		}
	}
	return true
}
