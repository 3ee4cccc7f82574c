package fswalk

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestCPUMeter: each walk's meter counts what its threads charged, and the total all of them.
func TestCPUMeter(t *testing.T) {
	var total atomic.Int64
	a, c := NewCPUMeter(&total), NewCPUMeter(&total)
	a.Add(2 * time.Second)
	c.Add(time.Second)
	a.Add(500 * time.Millisecond)
	if a.Spent() != 2500*time.Millisecond || c.Spent() != time.Second {
		t.Errorf("walks charged %v and %v, want 2.5s and 1s", a.Spent(), c.Spent())
	}
	if got := time.Duration(total.Load()); got != 3500*time.Millisecond {
		t.Errorf("total %v, want 3.5s", got)
	}
}
