// Package mountinfo reads a process's mount table (/proc/<pid>/mountinfo, proc(5)) for the
// writable-layer locator in exporter/source and the layout calibration in exporter/calibrate.
package mountinfo

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
)

// Mount is what the readers here use of one line of a mount table.
type Mount struct {
	Device string // major:minor of the mounted filesystem
	Root   string // the directory of that filesystem mounted here: a bind's source
	Point  string // where it is mounted
	FSType string
	Upper  string // an overlay's upperdir; "" for any other filesystem
}

// Read reads the mount table at path, this process's own when path is "".
func Read(path string) ([]Mount, error) {
	if path == "" {
		path = "/proc/self/mountinfo"
	}
	// The process's own mount table, or a file a test names; never a request's.
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading the mount table: %w", err)
	}
	defer f.Close()
	return Parse(f)
}

// Parse reads a mount table, its mounts in its order: a later mount at the same point hides
// the earlier ones. Lines of another form are passed over.
func Parse(r io.Reader) ([]Mount, error) {
	var mounts []Mount
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20) // lowerdir lists of many layers make long lines
	for sc.Scan() {
		// 36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, f := range fields {
			if f == "-" && i >= 6 {
				sep = i
				break
			}
		}
		if sep < 0 || len(fields) < sep+4 {
			continue
		}
		m := Mount{Device: fields[2], Root: Unescape(fields[3]), Point: Unescape(fields[4]), FSType: fields[sep+1]}
		if m.FSType == "overlay" {
			for _, opt := range strings.Split(fields[sep+3], ",") {
				if v, ok := strings.CutPrefix(opt, "upperdir="); ok {
					m.Upper = Unescape(v)
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

// Unescape undoes the octal escapes the kernel writes into a mountinfo field for a space, a tab,
// a newline and a backslash (\040, \011, \012, \134).
func Unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) && isOctal(s[i+1:i+4]) {
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
