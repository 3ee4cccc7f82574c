package exporter

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// benchTree makes dirs folders of files small files each, with some hard links.
func benchTree(b *testing.B, dirs, files int) string {
	b.Helper()
	root := b.TempDir()
	for d := range dirs {
		dir := filepath.Join(root, fmt.Sprintf("d%03d", d), "nested")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		for f := range files {
			p := filepath.Join(dir, fmt.Sprintf("f%04d", f))
			if err := os.WriteFile(p, make([]byte, 100+f%5000), 0o644); err != nil {
				b.Fatal(err)
			}
			if f%50 == 0 {
				if err := os.Link(p, p+".link"); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	return root
}

// BenchmarkDiskUsageVsGNUDu walks the same tree with MeasureDiskUsage and with
// `du -s -B1 -x`, alternating, and reports the ratio of their wall times: below 1
// means we are faster than GNU du (which also pays a process start).
//
//	go test -run '^$' -bench DiskUsageVsGNUDu ./exporter/
func BenchmarkDiskUsageVsGNUDu(b *testing.B) {
	for _, size := range []struct{ dirs, files int }{{20, 500}, {80, 500}} {
		b.Run(fmt.Sprintf("files=%d", size.dirs*size.files), func(b *testing.B) {
			root := benchTree(b, size.dirs, size.files)
			var ours, theirs time.Duration
			b.ResetTimer()
			for b.Loop() {
				start := time.Now()
				if _, err := MeasureDiskUsage(context.Background(), root, 4); err != nil {
					b.Fatal(err)
				}
				ours += time.Since(start)
				start = time.Now()
				if err := exec.Command("du", "-s", "-B1", "-x", root).Run(); err != nil {
					b.Fatal(err)
				}
				theirs += time.Since(start)
			}
			b.ReportMetric(float64(ours)/float64(theirs), "ours/du")
			b.ReportMetric(float64(ours.Nanoseconds())/float64(b.N), "ours-ns/walk")
			b.ReportMetric(float64(theirs.Nanoseconds())/float64(b.N), "du-ns/walk")
		})
	}
}

// BenchmarkDiskUsageMemory reports the heap a walk allocates per file at two tree
// sizes; their ratio shows whether memory grows with the number of files (it
// should not, but for the hard-linked inodes that must be remembered).
//
//	go test -run '^$' -bench DiskUsageMemory -benchmem ./exporter/
func BenchmarkDiskUsageMemory(b *testing.B) {
	peak := map[int]float64{}
	for _, files := range []int{5000, 40000} {
		b.Run(fmt.Sprintf("files=%d", files), func(b *testing.B) {
			root := benchTree(b, files/500, 500)
			b.ReportAllocs()
			var maxHeap uint64
			for b.Loop() {
				runtime.GC()
				done := make(chan struct{})
				go func() { // sample the live heap while the walk runs
					var ms runtime.MemStats
					for {
						select {
						case <-done:
							return
						default:
						}
						runtime.ReadMemStats(&ms)
						maxHeap = max(maxHeap, ms.HeapInuse)
						time.Sleep(time.Millisecond)
					}
				}()
				if _, err := MeasureDiskUsage(context.Background(), root, 4); err != nil {
					b.Fatal(err)
				}
				close(done)
			}
			peak[files] = float64(maxHeap)
			b.ReportMetric(float64(maxHeap), "peak-heap-bytes")
			if small, ok := peak[5000]; ok && files != 5000 {
				b.ReportMetric(float64(maxHeap)/small, "peak-heap/peak-heap@5000")
			}
		})
	}
}
