package podcgroup

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/emptydir-guard/emptydir-guard/internal/fswalk"
	"github.com/emptydir-guard/emptydir-guard/internal/fswalk/fswalktest"
)

// BenchmarkMarkAgainstWalk measures what the exporter pays per pod and cycle for the change
// signal, Locate plus Read of a real pod cgroup of this host's version, against the cheapest
// walk it spares: one of a directory holding a single file (ratio mark/walk). What a node pays per
// cycle for the marks is this times its pods with a walked part.
//
//	go test -run '^$' -bench MarkAgainstWalk ./internal/podcgroup/
func BenchmarkMarkAgainstWalk(b *testing.B) {
	fswalktest.RequireRoot(b, "making cgroups")
	root := "/podcgroup-bench-" + strconv.Itoa(os.Getpid())
	cfg := DefaultConfig()
	cfg.Root = root
	l, err := Open(cfg)
	if err != nil {
		b.Fatal(err)
	}
	const uid = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
	dir := l.base
	for _, c := range splitPath(root + "/kubepods/besteffort/pod" + uid) {
		dir = filepath.Join(dir, c)
		if err := os.Mkdir(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		made := dir
		b.Cleanup(func() { _ = os.Remove(made) }) // cgroups go with rmdir, deepest first
	}
	directory := b.TempDir()
	if err := os.WriteFile(filepath.Join(directory, "f"), make([]byte, 4096), 0o644); err != nil {
		b.Fatal(err)
	}
	var mark, walk time.Duration
	for b.Loop() {
		start := time.Now()
		if _, err := l.Mark(uid, QOSBestEffort); err != nil {
			b.Fatal(err)
		}
		mid := time.Now()
		if _, err := fswalk.MeasureDiskUsage(context.Background(), directory, fswalk.Options{}); err != nil {
			b.Fatal(err)
		}
		mark, walk = mark+mid.Sub(start), walk+time.Since(mid)
	}
	b.ReportMetric(float64(mark.Nanoseconds())/float64(b.N), "mark-ns/op")
	b.ReportMetric(float64(walk.Nanoseconds())/float64(b.N), "walk-ns/op")
	b.ReportMetric(float64(mark)/float64(walk), "mark/walk")
}
