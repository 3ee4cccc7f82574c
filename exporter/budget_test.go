package exporter

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fakeCPU is a process CPU clock the test advances.
type fakeCPU struct{ spent time.Duration }

func (c *fakeCPU) read() time.Duration { return c.spent }

func TestCPUBudget(t *testing.T) {
	clk := &clock{t: t0}
	cpu := &fakeCPU{}
	// 10 % of a core, saving up at most 1 s of CPU.
	b := newCPUBudget(0.1, time.Second, cpu.read, clk.Now)

	if got := b.remaining(); got != time.Second {
		t.Fatalf("a new budget holds %v, want its capacity 1s", got)
	}
	if !b.allows(0) {
		t.Fatal("a full budget refused a walk")
	}
	cpu.spent += 1500 * time.Millisecond // the walk overdraws the bucket
	if got := b.remaining(); got != -500*time.Millisecond {
		t.Errorf("after spending 1.5s of 1s: %v, want -500ms", got)
	}
	if b.allows(0) {
		t.Error("a walk started on an overdrawn budget")
	}

	clk.Add(5 * time.Second) // 10 % of 5 s = 500ms pays the debt back, no more
	if got := b.remaining(); got != 0 {
		t.Errorf("after 5s at 10%%: %v, want 0", got)
	}
	if b.allows(0) {
		t.Error("a walk started on an empty budget")
	}

	clk.Add(time.Hour) // idle: the bucket fills up to its capacity, no more
	if got := b.remaining(); got != time.Second {
		t.Errorf("after an idle hour: %v, want the capacity 1s", got)
	}

	// A walk whose cost is known starts only when the bucket covers it (or is full).
	cpu.spent += 400 * time.Millisecond
	if b.allows(700 * time.Millisecond) {
		t.Error("a 700ms walk started with 600ms left")
	}
	if !b.allows(500 * time.Millisecond) {
		t.Error("a 500ms walk refused with 600ms left")
	}
	clk.Add(time.Hour)
	if !b.allows(5 * time.Second) {
		t.Error("a walk costlier than the capacity is refused even by a full bucket: it would never run")
	}
}

// TestCPUMeter: each walk's meter counts what its threads charged, and the total all of them.
func TestCPUMeter(t *testing.T) {
	var total atomic.Int64
	a, c := &cpuMeter{total: &total}, &cpuMeter{total: &total}
	a.add(2 * time.Second)
	c.add(time.Second)
	a.add(500 * time.Millisecond)
	if a.spent() != 2500*time.Millisecond || c.spent() != time.Second {
		t.Errorf("walks charged %v and %v, want 2.5s and 1s", a.spent(), c.spent())
	}
	if got := time.Duration(total.Load()); got != 3500*time.Millisecond {
		t.Errorf("total %v, want 3.5s", got)
	}
	if cpuMeterOf(context.Background()) != nil || cpuMeterOf(withCPUMeter(context.Background(), a)) != a {
		t.Error("the meter does not travel in the context")
	}
}

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
	m := &cpuMeter{total: &total}
	before := processCPU(t)
	if _, err := MeasureDiskUsage(withCPUMeter(context.Background(), m), dir, 4); err != nil {
		t.Fatal(err)
	}
	spent := processCPU(t) - before
	if m.spent() <= 0 || m.spent() > spent+time.Millisecond { // getrusage rounds to microseconds
		t.Errorf("walk charged %v, want above 0 and at most the %v the process spent", m.spent(), spent)
	}
	if time.Duration(total.Load()) != m.spent() {
		t.Errorf("total %v, want the one walk's %v", time.Duration(total.Load()), m.spent())
	}
}

// processCPU is the CPU time, user and system, the test process has spent.
func processCPU(t *testing.T) time.Duration {
	t.Helper()
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
