package framework

import (
	"fmt"
	"os/exec"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// DuBytes is the oracle: GNU du -s -B1 of a folder (DuOf, failing the test on error), once
// the data written there has been allocated: until writeback a fragmented file may still gain
// an extent block, which the exporter's later walks count.
func DuBytes(t TB, dir string) int64 {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	err = unix.Syncfs(fd)
	unix.Close(fd)
	if err != nil {
		t.Fatalf("syncfs %s: %v", dir, err)
	}
	n, err := DuOf(dir)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// DuOf is DuBytes without TB and without the sync, for goroutines: GNU du -s -B1 of a folder.
func DuOf(dir string) (int64, error) {
	sizes, err := Du(dir)
	return sizes[dir], err
}

// Du is the oracle itself: GNU du -s -B1 of each folder in one run, by folder as given.
func Du(dirs ...string) (map[string]int64, error) {
	out, err := exec.Command("du", append([]string{"-s", "-B1", "--"}, dirs...)...).Output()
	if err != nil {
		return nil, fmt.Errorf("du of %d folders: %w", len(dirs), err)
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
