package calibrate

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	"github.com/emptydir-guard/emptydir-guard/internal/mountinfo"
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
		m := mount{root: mountinfo.Unescape(fields[3]), point: mountinfo.Unescape(fields[4]), fsType: super[0]}
		if m.fsType == "overlay" {
			for _, opt := range strings.Split(super[2], ",") {
				if v, ok := strings.CutPrefix(opt, "upperdir="); ok {
					m.upper = mountinfo.Unescape(v)
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
