package fswalk

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestCPUMeter: each walk's meter counts what its threads charged, and each total what the
// walks that add to it did.
func TestCPUMeter(t *testing.T) {
	var total, some atomic.Int64
	a, c := NewCPUMeter(&total, &some), NewCPUMeter(&total, nil)
	a.Add(2 * time.Second)
	c.Add(time.Second)
	a.Add(500 * time.Millisecond)
	if a.Spent() != 2500*time.Millisecond || c.Spent() != time.Second {
		t.Errorf("walks charged %v and %v, want 2.5s and 1s", a.Spent(), c.Spent())
	}
	if got := time.Duration(total.Load()); got != 3500*time.Millisecond {
		t.Errorf("total %v, want 3.5s", got)
	}
	if got := time.Duration(some.Load()); got != 2500*time.Millisecond {
		t.Errorf("the first walk's other total %v, want 2.5s", got)
	}
}

// TestCPUMeterTotals: a walk charged to several totals (a live walk: its caller's budget for
// the namespace and in all) adds to each.
func TestCPUMeterTotals(t *testing.T) {
	var tenant, caller atomic.Int64
	m := NewCPUMeter(&tenant, nil, &caller)
	m.Add(3 * time.Second)
	if tenant.Load() != int64(3*time.Second) || caller.Load() != int64(3*time.Second) || m.Spent() != 3*time.Second {
		t.Errorf("totals %v and %v, walk %v; want 3s each", time.Duration(tenant.Load()), time.Duration(caller.Load()), m.Spent())
	}
}

// TestCPUMeterCutWhen: a meter that is to be cut asks after each charge, and cuts once, from
// the first charge after which it is over (a live walk that exhausted its caller's budget).
func TestCPUMeterCutWhen(t *testing.T) {
	var total atomic.Int64
	cuts := 0
	m := NewCPUMeter(&total).CutWhen(func() bool { return total.Load() > int64(2*time.Second) }, func() { cuts++ })
	m.Add(time.Second)
	m.Add(time.Second)
	if cuts != 0 {
		t.Fatalf("cut at %v, not over yet", m.Spent())
	}
	m.Add(time.Millisecond)
	m.Add(time.Second)
	if cuts != 1 || total.Load() != int64(3*time.Second+time.Millisecond) {
		t.Errorf("%d cuts, total %v; want 1 cut and every charge counted", cuts, time.Duration(total.Load()))
	}
}
