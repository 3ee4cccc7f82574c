package fswalk

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/emptydir-guard/emptydir-guard/internal/fswalk/fswalktest"
)

// A medium Memory volume is a tmpfs of its own: its statistics give the bytes a walk counts,
// the walk its inodes as du counts them (statfs counts a hard link as one more); a directory of a
// larger tmpfs, or of a disk, is left to the walk.
func TestOwnTmpfsUsage(t *testing.T) {
	dir := t.TempDir()
	vol := filepath.Join(dir, "vol")
	if err := os.Mkdir(vol, 0o755); err != nil {
		t.Fatal(err)
	}
	opts := Options{Concurrency: 2, Retries: 1}
	if _, ok, err := OwnTmpfsUsage(context.Background(), vol, opts); err != nil || ok {
		t.Fatalf("a directory on the test's disk: ok %v, %v; want no tmpfs of its own", ok, err)
	}
	fswalktest.MountTmpfs(t, vol, "size=8m")
	writeFile(t, filepath.Join(vol, "a"), 3<<20)
	writeFile(t, filepath.Join(vol, "sub", "b"), 5000)
	if err := os.Link(filepath.Join(vol, "a"), filepath.Join(vol, "sub", "a-link")); err != nil {
		t.Fatal(err)
	}

	got, ok, err := OwnTmpfsUsage(context.Background(), vol, opts)
	if err != nil || !ok {
		t.Fatalf("OwnTmpfsUsage: ok %v, %v", ok, err)
	}
	var sfs unix.Statfs_t
	if err := unix.Statfs(vol, &sfs); err != nil {
		t.Fatal(err)
	}
	statfs := int64(sfs.Blocks-sfs.Bfree) * sfs.Bsize
	if got.UsedBytes != statfs || got.UsedBytes != gnuDU(t, vol) {
		t.Errorf("OwnTmpfsUsage says %d bytes, statfs %d, GNU du %d: want one number", got.UsedBytes, statfs, gnuDU(t, vol))
	}
	if want := gnuInodes(t, vol); got.Inodes != want || got.LowerBound() {
		t.Errorf("OwnTmpfsUsage says %d inodes (%+v), GNU du %d, complete (statfs counts %d, the hard link twice)",
			got.Inodes, got, want, sfs.Files-sfs.Ffree)
	}
	if got.NamedBytes != got.UsedBytes {
		t.Errorf("NamedBytes %d, want the walk's %d: every byte has a name", got.NamedBytes, got.UsedBytes)
	}
	// A directory inside it is no tmpfs of its own: its usage is not the whole filesystem's.
	if _, ok, err := OwnTmpfsUsage(context.Background(), filepath.Join(vol, "sub"), opts); err != nil || ok {
		t.Errorf("a directory of the tmpfs: ok %v, %v; want it left to the walk", ok, err)
	}

	// A file deleted but held open: the filesystem's bytes, not its names'.
	held, err := os.Create(filepath.Join(vol, "held"))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if _, err := held.Write(make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(held.Name()); err != nil {
		t.Fatal(err)
	}
	got, ok, err = OwnTmpfsUsage(context.Background(), vol, opts)
	if err != nil || !ok {
		t.Fatalf("OwnTmpfsUsage with a held file: ok %v, %v", ok, err)
	}
	if du := gnuDU(t, vol); got.NamedBytes != du || got.UsedBytes != du+1<<20 {
		t.Errorf("with 1 MiB held open: UsedBytes %d, NamedBytes %d; want GNU du's %d and 1 MiB more", got.UsedBytes, got.NamedBytes, du)
	}
}
