package duoracle

import (
	"os"
	"path/filepath"
	"testing"
)

func TestBytesCountsAllocatedBlocksPerDirectory(t *testing.T) {
	root := t.TempDir()
	empty, full := filepath.Join(root, "empty"), filepath.Join(root, "full")
	for _, d := range []string{empty, full} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(full, "f"), make([]byte, 256<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	sizes, err := Bytes(empty, full)
	if err != nil {
		t.Fatal(err)
	}
	if len(sizes) != 2 || sizes[full] < 256<<10 || sizes[empty] >= sizes[full] {
		t.Errorf("Bytes = %v, want both directories, %s at least 256 KiB and more than %s", sizes, full, empty)
	}
	one, err := Of(full)
	if err != nil || one != sizes[full] {
		t.Errorf("Of(%s) = %d, %v; want %d", full, one, err, sizes[full])
	}
}

func TestBytesOfAMissingDirectoryFails(t *testing.T) {
	if sizes, err := Bytes(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Errorf("Bytes of a missing directory = %v, want an error", sizes)
	}
}
