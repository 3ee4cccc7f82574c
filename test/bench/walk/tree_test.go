package walk

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/emptydir-guard/emptydir-guard/internal/fswalk"
	"github.com/emptydir-guard/emptydir-guard/test/bench/peers"
)

// Every shape generates about the entries asked for, with data, holes and hard links where
// the shape promises them, and the three walks agree on it: the benchmark compares like with
// like.
func TestShapesAgreeAcrossTools(t *testing.T) {
	const entries = 4096
	cache := t.TempDir()
	for _, shape := range Shapes {
		t.Run(shape.Name, func(t *testing.T) {
			root, err := Ensure(cache, shape, entries)
			if err != nil {
				t.Fatal(err)
			}
			du, err := Reference(context.Background(), root)
			if err != nil {
				t.Fatal(err)
			}
			names := countNames(t, root)
			if names < entries*8/10 || names > entries*12/10 {
				t.Errorf("%d names below the root, want about %d", names, entries)
			}
			if shape.Name == "hard-links" && du.Inodes >= int64(names)+1 {
				t.Errorf("%d inodes for %d names: no hard links", du.Inodes, names)
			}
			if shape.Name != "hard-links" && du.Inodes != int64(names)+1 {
				t.Errorf("%d inodes for %d names and the root", du.Inodes, names)
			}
			k, err := peers.Kubelet(root)
			if err != nil {
				t.Fatal(err)
			}
			o, err := fswalk.MeasureDiskUsage(context.Background(), root, fswalk.Options{Concurrency: 4})
			if err != nil {
				t.Fatal(err)
			}
			if k != du || o.UsedBytes != du.Bytes || o.Inodes != du.Inodes {
				t.Errorf("du %+v, kubelet %+v, ours %+v", du, k, o)
			}
		})
	}
}

// A complete tree is reused as it is; an incomplete one (no marker: generation interrupted)
// is generated again from scratch.
func TestEnsureReusesOnlyCompleteTrees(t *testing.T) {
	cache := t.TempDir()
	shape, err := ShapeNamed("flat")
	if err != nil {
		t.Fatal(err)
	}
	root, err := Ensure(cache, shape, 10)
	if err != nil {
		t.Fatal(err)
	}
	stray := filepath.Join(root, "stray")
	if err := os.WriteFile(stray, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Ensure(cache, shape, 10); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stray); err != nil {
		t.Errorf("a complete tree was generated again: %v", err)
	}
	if err := os.Remove(filepath.Join(cache, "flat-10.complete")); err != nil {
		t.Fatal(err)
	}
	if _, err := Ensure(cache, shape, 10); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stray); !os.IsNotExist(err) {
		t.Errorf("an incomplete tree was reused (stray file: %v)", err)
	}
	if n := countNames(t, root); n != 10 {
		t.Errorf("%d files after regenerating, want 10", n)
	}
}

func countNames(t *testing.T, root string) int {
	t.Helper()
	n := -1 // the root itself
	err := filepath.WalkDir(root, func(string, os.DirEntry, error) error { n++; return nil })
	if err != nil {
		t.Fatal(err)
	}
	return n
}
