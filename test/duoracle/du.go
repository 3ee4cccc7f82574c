// Package duoracle is the tests' oracle for the bytes a directory uses: GNU du -s -B1, the
// number the kubelet's own emptyDir accounting and emptyDir guard must both agree with.
package duoracle

import (
	"fmt"
	"os/exec"
	"strconv"
	"strings"
)

// Bytes is GNU du -s -B1 of each directory in one run, by directory as given.
func Bytes(dirs ...string) (map[string]int64, error) {
	out, err := exec.Command("du", append([]string{"-s", "-B1", "--"}, dirs...)...).Output()
	if err != nil {
		return nil, fmt.Errorf("du of %d directories: %w", len(dirs), err)
	}
	sizes := make(map[string]int64, len(dirs))
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		n, dir, ok := strings.Cut(line, "\t")
		if !ok {
			return nil, fmt.Errorf("du line %q", line)
		}
		b, err := strconv.ParseInt(n, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("du line %q: %w", line, err)
		}
		sizes[dir] = b
	}
	for _, d := range dirs {
		if _, ok := sizes[d]; !ok {
			return nil, fmt.Errorf("du printed no size for %s", d)
		}
	}
	return sizes, nil
}

// Of is Bytes of one directory.
func Of(dir string) (int64, error) {
	sizes, err := Bytes(dir)
	return sizes[dir], err
}
