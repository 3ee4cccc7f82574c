package fswalk

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// TestThreadMeterCountsTheWalkingThread: a metered walk charges the CPU time its threads
// spent, which is more than nothing and no more than the whole process spent meanwhile.
func TestThreadMeterCountsTheWalkingThread(t *testing.T) {
	dir := t.TempDir()
	for i := range 200 {
		sub := filepath.Join(dir, fmt.Sprintf("d%03d", i))
		if err := os.Mkdir(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		for j := range 20 {
			if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%02d", j)), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	var total atomic.Int64
	m := NewCPUMeter(&total)
	before := processCPU(t)
	if _, err := MeasureDiskUsage(context.Background(), dir, Options{Concurrency: 4, Meter: m}); err != nil {
		t.Fatal(err)
	}
	spent := processCPU(t) - before
	if m.Spent() <= 0 || m.Spent() > spent+time.Millisecond { // getrusage rounds to microseconds
		t.Errorf("walk charged %v, want above 0 and at most the %v the process spent", m.Spent(), spent)
	}
	if time.Duration(total.Load()) != m.Spent() {
		t.Errorf("total %v, want the one walk's %v", time.Duration(total.Load()), m.Spent())
	}
}

// processCPU is ProcessCPU, failing the test on an error.
func processCPU(t *testing.T) time.Duration {
	t.Helper()
	d, err := ProcessCPU()
	if err != nil {
		t.Fatal(err)
	}
	return d
}
