package budget

import (
	"testing"
	"time"
)

// t0 is the moment the tests' clocks start from.
var t0 = time.Date(2026, 12, 2, 17, 0, 0, 0, time.UTC)

// fakeCPU is a process CPU clock the test advances.
type fakeCPU struct{ spent time.Duration }

func (c *fakeCPU) read() time.Duration { return c.spent }

func TestCPUBudget(t *testing.T) {
	now := t0 // the clock the test advances
	cpu := &fakeCPU{}
	// 10 % of a core, saving up at most 1 s of CPU.
	b := New(0.1, time.Second, cpu.read, func() time.Time { return now })

	if got := b.Remaining(); got != time.Second {
		t.Fatalf("a new budget holds %v, want its capacity 1s", got)
	}
	if !b.Allows(0) {
		t.Fatal("a full budget refused a walk")
	}
	cpu.spent += 1500 * time.Millisecond // the walk overdraws the bucket
	if got := b.Remaining(); got != -500*time.Millisecond {
		t.Errorf("after spending 1.5s of 1s: %v, want -500ms", got)
	}
	if b.Allows(0) {
		t.Error("a walk started on an overdrawn budget")
	}

	now = now.Add(5 * time.Second) // 10 % of 5 s = 500ms pays the debt back, no more
	if got := b.Remaining(); got != 0 {
		t.Errorf("after 5s at 10%%: %v, want 0", got)
	}
	if b.Allows(0) {
		t.Error("a walk started on an empty budget")
	}

	now = now.Add(time.Hour) // idle: the bucket fills up to its capacity, no more
	if got := b.Remaining(); got != time.Second {
		t.Errorf("after an idle hour: %v, want the capacity 1s", got)
	}

	// A walk whose cost is known starts only when the bucket covers it (or is full).
	cpu.spent += 400 * time.Millisecond
	if b.Allows(700 * time.Millisecond) {
		t.Error("a 700ms walk started with 600ms left")
	}
	if !b.Allows(500 * time.Millisecond) {
		t.Error("a 500ms walk refused with 600ms left")
	}
	now = now.Add(time.Hour)
	if !b.Allows(5 * time.Second) {
		t.Error("a walk costlier than the capacity is refused even by a full bucket: it would never run")
	}
}

// TestCPUBudgetFloorDebt: what the floor walks spend is a debt of its own, never forgiven
// (the bucket forgives only its own debt beyond one bucket), paid first by the bucket's
// income; until it is paid, it counts against the walks on credit.
func TestCPUBudgetFloorDebt(t *testing.T) {
	now := t0
	onCredit, onFloor := &fakeCPU{}, &fakeCPU{}
	// 10 % of a core, saving up at most 1 s of CPU.
	b := New(0.1, time.Second, onCredit.read, func() time.Time { return now }).WithFloor(onFloor.read)

	onFloor.spent += 5 * time.Second // floor walks, five buckets' worth
	if got := b.Remaining(); got != -4*time.Second {
		t.Errorf("after 5s of floor walks on a full 1s bucket: %v, want -4s (nothing forgiven)", got)
	}
	if b.Allows(0) {
		t.Error("a walk on credit started while the floor walks' debt exceeds the bucket")
	}
	now = now.Add(45 * time.Second) // 4.5 s of income: the debt first
	if got := b.Remaining(); got != 500*time.Millisecond {
		t.Errorf("after 45s at 10%%: %v, want 500ms", got)
	}
	if !b.Allows(0) || b.Allows(time.Second) {
		t.Error("with 500ms left, want a walk on any credit allowed and a 1s one refused")
	}
	onCredit.spent += 3 * time.Second // a walk on credit overdraws the full bucket
	if got := b.Remaining(); got != -1500*time.Millisecond {
		t.Errorf("after a 3s walk on a full bucket: %v, want -1.5s (its debt beyond a bucket forgiven, the floor's 500ms not)", got)
	}
}
