package framework

import (
	"golang.org/x/sys/unix"

	"github.com/emptydir-guard/emptydir-guard/test/duoracle"
)

// DuBytes is the oracle (test/duoracle) of a directory, failing the test on error, once
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

// DuOf is DuBytes without TB and without the sync, for goroutines.
func DuOf(dir string) (int64, error) { return duoracle.Of(dir) }
