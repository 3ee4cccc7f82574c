package fswalk

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// A medium Memory volume is a tmpfs of its own: its statistics give what a walk counts, in
// O(1); a folder of a larger tmpfs, or of a disk, is left to the walk.
func TestOwnTmpfsUsage(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	vol := filepath.Join(dir, "vol")
	if err := os.Mkdir(vol, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := OwnTmpfsUsage(vol); err != nil || ok {
		t.Fatalf("a folder on the test's disk: ok %v, %v; want no tmpfs of its own", ok, err)
	}
	if err := unix.Mount("tmpfs", vol, "tmpfs", 0, "size=8m"); err != nil {
		t.Fatalf("mounting a tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(vol, unix.MNT_DETACH) })
	writeFile(t, filepath.Join(vol, "a"), 3<<20)
	writeFile(t, filepath.Join(vol, "sub", "b"), 5000)

	got, ok, err := OwnTmpfsUsage(vol)
	if err != nil || !ok {
		t.Fatalf("OwnTmpfsUsage: ok %v, %v", ok, err)
	}
	walked := measure(t, vol, 2)
	if got.UsedBytes != walked.UsedBytes || got.UsedBytes != gnuDU(t, vol) {
		t.Errorf("statfs says %d bytes, the walk %d, GNU du %d: want one number", got.UsedBytes, walked.UsedBytes, gnuDU(t, vol))
	}
	if got.Inodes != walked.Inodes {
		t.Errorf("statfs says %d inodes, the walk %d", got.Inodes, walked.Inodes)
	}
	// A folder inside it is no tmpfs of its own: its usage is not the whole filesystem's.
	if _, ok, err := OwnTmpfsUsage(filepath.Join(vol, "sub")); err != nil || ok {
		t.Errorf("a folder of the tmpfs: ok %v, %v; want it left to the walk", ok, err)
	}
}
