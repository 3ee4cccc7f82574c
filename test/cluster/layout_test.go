package cluster

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestLayoutDirs: Start creates a layout's directories and remembers the topmost one it made for
// each, and Stop removes exactly those; a directory that exists already (a real runtime's) is
// refused, never used nor removed.
func TestLayoutDirs(t *testing.T) {
	base := t.TempDir()
	existing := filepath.Join(base, "var", "lib")
	if err := os.MkdirAll(existing, 0o755); err != nil {
		t.Fatal(err)
	}
	l := &Layout{KubeletRootDir: filepath.Join(existing, "k0s", "kubelet"), ContainerdRoot: filepath.Join(existing, "k0s", "containerd"),
		ContainerdStateDir: filepath.Join(base, "run", "k0s", "containerd")}
	created, err := createLayoutDirs(l)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(existing, "k0s"), filepath.Join(existing, "k0s", "containerd"), filepath.Join(base, "run")}
	if !slices.Equal(created, want) {
		t.Errorf("created %v, want %v", created, want)
	}
	if err := removeLayoutDirs(created); err != nil {
		t.Fatal(err)
	}
	for _, d := range append(want, l.dirs()...) {
		if _, err := os.Lstat(d); !os.IsNotExist(err) {
			t.Errorf("%s left after removal (%v)", d, err)
		}
	}
	if _, err := os.Stat(existing); err != nil {
		t.Errorf("the directory that existed before is gone: %v", err)
	}

	runtimeRoot := filepath.Join(existing, "containerd")
	if err := os.MkdirAll(filepath.Join(runtimeRoot, "keep"), 0o755); err != nil {
		t.Fatal(err)
	}
	created, err = createLayoutDirs(&Layout{ContainerdRoot: runtimeRoot})
	if err == nil || len(created) != 0 {
		t.Errorf("an existing directory: created %v, err %v; want it refused", created, err)
	}
	if _, err := os.Stat(filepath.Join(runtimeRoot, "keep")); err != nil {
		t.Errorf("the existing directory was touched: %v", err)
	}
	// A directory directly below / is never removed, whatever the record says.
	if err := removeLayoutDirs([]string{"/nonexistent-edg-layout"}); err == nil {
		t.Error("removeLayoutDirs of a directory below / succeeded, want it refused")
	}
}
