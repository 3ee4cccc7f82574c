package peers

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// The peers agree with each other on a small tree, so a benchmark comparing against them
// compares like with like.
func TestPeersAgree(t *testing.T) {
	dir := t.TempDir()
	for i, size := range []int{0, 1, 4096, 100000} {
		sub := filepath.Join(dir, "d", string(rune('a'+i)))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(sub, "f"), make([]byte, size), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	k, err := Kubelet(dir)
	if err != nil {
		t.Fatal(err)
	}
	d, err := GNUDu(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if k != d {
		t.Fatalf("kubelet %+v, du %+v", k, d)
	}
	// 1 root + 1 "d" + 4 directories + 4 files.
	if k.Inodes != 10 {
		t.Errorf("inodes = %d, want 10", k.Inodes)
	}
}
