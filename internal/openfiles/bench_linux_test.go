package openfiles

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/emptydir-guard/emptydir-guard/internal/fswalk"
)

// BenchmarkCountAgainstWalk measures what --collection.open-files adds to one walk of a disk
// emptyDir: Count over a pod of 8 processes holding 64 descriptors each (one of them a deleted
// file on the volume's filesystem, so each process's mountinfo is read too), against the walk
// of a directory of 1000 files of 4KiB (ratio count/walk). Count reads only the pod's own
// processes, never the node's, so its cost follows the pod's descriptors, not the node's.
//
//	go test -run '^$' -bench CountAgainstWalk ./internal/openfiles/
func BenchmarkCountAgainstWalk(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("reading other processes' descriptors needs root")
	}
	const procs, fds, files = 8, 64, 1000
	dir := b.TempDir()
	for i := range files {
		sub := filepath.Join(dir, fmt.Sprint(i%20))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(sub, fmt.Sprint(i)), make([]byte, 4096), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	held := make([]*os.File, 0, fds)
	for i := range fds {
		f, err := os.Open(filepath.Join(dir, fmt.Sprint(i%20), fmt.Sprint(i)))
		if err != nil {
			b.Fatal(err)
		}
		held = append(held, f)
	}
	gone, err := os.Create(filepath.Join(b.TempDir(), "gone"))
	if err != nil {
		b.Fatal(err)
	}
	if err := os.Remove(gone.Name()); err != nil {
		b.Fatal(err)
	}
	held[0] = gone
	var pids []int
	for range procs {
		cmd := exec.Command("sleep", "1000")
		cmd.ExtraFiles = held
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		pids = append(pids, cmd.Process.Pid)
	}
	for _, f := range held {
		_ = f.Close()
	}
	t, err := TargetOf(dir)
	if err != nil {
		b.Fatal(err)
	}
	var count, walk time.Duration
	for b.Loop() {
		start := time.Now()
		if _, err := Count("/proc", pids, t); err != nil {
			b.Fatal(err)
		}
		mid := time.Now()
		if _, err := fswalk.MeasureDiskUsage(context.Background(), dir, fswalk.Options{}); err != nil {
			b.Fatal(err)
		}
		count, walk = count+mid.Sub(start), walk+time.Since(mid)
	}
	b.ReportMetric(float64(count.Nanoseconds())/float64(b.N), "count-ns/op")
	b.ReportMetric(float64(walk.Nanoseconds())/float64(b.N), "walk-ns/op")
	b.ReportMetric(float64(count)/float64(walk), "count/walk")
}
