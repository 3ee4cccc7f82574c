package remediator

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestKeyedMutexSerializesPerKey(t *testing.T) {
	var k keyedMutex
	var inA, maxA atomic.Int32
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			unlock := k.lock("a")
			defer unlock()
			n := inA.Add(1)
			if n > maxA.Load() {
				maxA.Store(n)
			}
			time.Sleep(100 * time.Microsecond)
			inA.Add(-1)
		})
	}
	// Another key is not blocked by "a".
	unlockA := k.lock("a")
	done := make(chan struct{})
	go func() { k.lock("b")(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("key b blocked by key a")
	}
	unlockA()
	wg.Wait()
	if maxA.Load() != 1 {
		t.Errorf("%d holders of key a at once", maxA.Load())
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.m) != 0 {
		t.Errorf("%d keys left behind", len(k.m))
	}
}

func TestLedgerReserveCommitRelease(t *testing.T) {
	l := newLedger(time.Hour)
	caps := Caps{Global: 2, Window: time.Hour}
	r1, why := l.reserve("n1", "a", testNow, caps)
	if why != "" {
		t.Fatal(why)
	}
	r2, why := l.reserve("n2", "b", testNow, caps)
	if why != "" {
		t.Fatal(why)
	}
	if _, why := l.reserve("n3", "c", testNow, caps); why != SkipCapGlobal {
		t.Fatalf("third reservation: %q, want cap_global", why)
	}
	r2.release() // the eviction did not happen: the slot is free again
	if _, why := l.reserve("n3", "c", testNow, caps); why != "" {
		t.Fatalf("after release: %q", why)
	}
	r1.commit("uid-1", OutcomeEvicted, testNow)
	if e, ok := l.last("uid-1"); !ok || e.Outcome != OutcomeEvicted {
		t.Fatalf("last = %+v, %v", e, ok)
	}
	// Past the horizon, everything is forgotten.
	if _, why := l.reserve("n1", "a", testNow.Add(2*time.Hour), caps); why != "" {
		t.Fatalf("after the horizon: %q", why)
	}
	if _, ok := l.last("uid-1"); ok {
		t.Error("uid remembered past the horizon")
	}
}
