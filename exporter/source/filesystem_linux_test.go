package source_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/emptydir-guard/emptydir-guard/exporter/part"
	"github.com/emptydir-guard/emptydir-guard/exporter/source"
	"github.com/emptydir-guard/emptydir-guard/internal/fswalk/fswalktest"
)

// TestMemoryVolumeCountsTmpfsXattrs: the kubelet mounts a tmpfs of its own for every medium:
// Memory volume, and for that layout the exporter read statfs alone, which never sees user.*
// extended attributes: kernel memory in no block and past the tmpfs size, 4.8 MB on a 1Mi
// volume measured as 0 (issue 30, item 6; only a directory of a shared tmpfs was walked for them).
// Each volume here is a tmpfs of its own at the kubelet's path: its bytes must be what statfs
// counts plus the user.* names and values, each inode once, and one volume's attributes are
// not another's. Needs root (mounts) and Linux 6.6 or later (user.* attributes on tmpfs).
func TestMemoryVolumeCountsTmpfsXattrs(t *testing.T) {
	root := t.TempDir()
	pod := part.Pod{Namespace: "ns", Pod: "p", UID: "uid-1"}
	withXattrs, without := part.Part{Name: "cache", Medium: part.MediumMemory}, part.Part{Name: "plain", Medium: part.MediumMemory}
	statfs := map[string]int64{} // the volume's bytes as its tmpfs's statistics count them
	for _, v := range []part.Part{withXattrs, without} {
		dir := part.EmptyDirPath(root, pod.UID, v.Name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		fswalktest.MountTmpfs(t, dir, "size=1m")
		if err := os.WriteFile(filepath.Join(dir, "f"), make([]byte, 4096), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Link(filepath.Join(dir, "f"), filepath.Join(dir, "sub", "f-link")); err != nil {
			t.Fatal(err)
		}
		statfs[v.Name] = statfsUsed(t, dir)
	}

	dir := part.EmptyDirPath(root, pod.UID, withXattrs.Name)
	set := map[string]map[string]int{
		"f":   {"user.a": 3000, "user.b": 100},
		"sub": {"user.d": 50},
		".":   {"user.r": 7},
	}
	// More than the 1 MiB the tmpfs may hold in blocks: the size limit does not bound them.
	for i := range 20 {
		name := fmt.Sprintf("big%02d", i)
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		set[name] = map[string]int{"user.v": 60000}
	}
	xattrs := int64(0)
	for entry, attrs := range set {
		for attr, size := range attrs {
			if err := unix.Setxattr(filepath.Join(dir, entry), attr, make([]byte, size), 0); err != nil {
				if errors.Is(err, unix.EOPNOTSUPP) {
					t.Skipf("this kernel's tmpfs refuses user.* attributes (they came with Linux 6.6): nothing to count: %v", err)
				}
				t.Fatal(err)
			}
			xattrs += int64(len(attr) + size)
		}
	}
	if used := statfsUsed(t, dir); used != statfs[withXattrs.Name] {
		t.Fatalf("statfs counts %d bytes with %d bytes of attributes, %d without: the test's premise is that it does not see them",
			used, xattrs, statfs[withXattrs.Name])
	}

	src := &source.Filesystem{KubeletRootDir: root, WalkConcurrency: 2}
	for _, tc := range []struct {
		vol        part.Part
		want       int64
		wantInodes int64 // as du counts them: the root, f (its hard link once), sub, the big files
	}{
		{withXattrs, statfs[withXattrs.Name] + xattrs, 3 + 20},
		{without, statfs[without.Name], 3},
	} {
		m, err := src.MeasurePart(context.Background(), pod, tc.vol, nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.vol.Name, err)
		}
		if m.UsedBytes != tc.want || m.Method != part.MethodStatfs || m.LowerBound() {
			t.Errorf("%s: used %d bytes (method %q, lower bound %v); want %d (method %q, complete): statfs's %d bytes plus the user.* names and values",
				tc.vol.Name, m.UsedBytes, m.Method, m.LowerBound(), tc.want, part.MethodStatfs, statfs[tc.vol.Name])
		}
		// statfs counts a hard link as an inode, and a KiB of attributes as one more.
		if m.InodesUsed != tc.wantInodes {
			t.Errorf("%s: %d inodes, want %d as du counts them", tc.vol.Name, m.InodesUsed, tc.wantInodes)
		}
	}
}

// statfsUsed is the bytes in use on the filesystem holding dir, as statfs counts them.
func statfsUsed(t *testing.T, dir string) int64 {
	t.Helper()
	var sfs unix.Statfs_t
	if err := unix.Statfs(dir, &sfs); err != nil {
		t.Fatal(err)
	}
	return int64(sfs.Blocks-sfs.Bfree) * sfs.Bsize
}
