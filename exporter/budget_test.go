package exporter

import (
	"testing"
	"time"
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
	w, ok := b.start(0)
	if !ok {
		t.Fatal("a full budget refused a walk")
	}
	cpu.spent += 1500 * time.Millisecond // the walk overdraws the bucket
	if got := b.end(w); got != 1500*time.Millisecond {
		t.Errorf("walk cost %v, want the 1.5s spent while it alone ran", got)
	}
	if got := b.remaining(); got != -500*time.Millisecond {
		t.Errorf("after spending 1.5s of 1s: %v, want -500ms", got)
	}
	if _, ok := b.start(0); ok {
		t.Error("a walk started on an overdrawn budget")
	}

	clk.Add(5 * time.Second) // 10 % of 5 s = 500ms pays the debt back, no more
	if got := b.remaining(); got != 0 {
		t.Errorf("after 5s at 10%%: %v, want 0", got)
	}
	if _, ok := b.start(0); ok {
		t.Error("a walk started on an empty budget")
	}

	clk.Add(time.Hour) // idle: the bucket fills up to its capacity, no more
	if got := b.remaining(); got != time.Second {
		t.Errorf("after an idle hour: %v, want the capacity 1s", got)
	}

	// A walk whose cost is known starts only when the bucket covers it (or is full).
	cpu.spent += 400 * time.Millisecond // scrapes, live measurements: charged too
	if _, ok := b.start(700 * time.Millisecond); ok {
		t.Error("a 700ms walk started with 600ms left")
	}
	if w, ok := b.start(500 * time.Millisecond); !ok {
		t.Error("a 500ms walk refused with 600ms left")
	} else {
		b.end(w)
	}
	clk.Add(time.Hour)
	if w, ok := b.start(5 * time.Second); !ok {
		t.Error("a walk costlier than the capacity is refused even by a full bucket: it would never run")
	} else {
		b.end(w)
	}
}

// TestCPUBudgetSharesAmongWalks: CPU spent while several walks run is attributed to them
// equally, and what is spent while none runs to none.
func TestCPUBudgetSharesAmongWalks(t *testing.T) {
	clk := &clock{t: t0}
	cpu := &fakeCPU{}
	b := newCPUBudget(1, time.Minute, cpu.read, clk.Now)

	cpu.spent += time.Second // before any walk
	a, _ := b.start(0)
	cpu.spent += 2 * time.Second // a alone
	c, _ := b.start(0)
	cpu.spent += 2 * time.Second // a and c
	if got := b.end(a); got != 3*time.Second {
		t.Errorf("a: %v, want 2s alone + half of 2s", got)
	}
	cpu.spent += 500 * time.Millisecond // c alone
	if got := b.end(c); got != 1500*time.Millisecond {
		t.Errorf("c: %v, want half of 2s + 500ms alone", got)
	}
}
