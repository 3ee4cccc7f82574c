package exporter

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"testing"
)

func (q *callerQueue) users(caller string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	if t := q.callers[caller]; t != nil {
		return t.users
	}
	return 0
}

func TestCallerQueue(t *testing.T) {
	q := newCallerQueue()
	ctx := context.Background()
	first, ok := q.acquire(ctx, "10.0.0.1")
	if !ok {
		t.Fatal("first request of a caller refused")
	}
	// Another caller is not behind this one.
	other, ok := q.acquire(ctx, "10.0.0.2")
	if !ok {
		t.Fatal("a second caller waits for the first")
	}
	other()

	// The caller's further requests queue, up to the bound.
	var wg sync.WaitGroup
	var mu sync.Mutex
	running, maxRunning, done := 0, 0, 0
	for range maxQueuedPerCaller {
		wg.Go(func() {
			release, ok := q.acquire(ctx, "10.0.0.1")
			if !ok {
				t.Error("a queued request was refused")
				return
			}
			mu.Lock()
			running++
			maxRunning = max(maxRunning, running)
			mu.Unlock()
			runtime.Gosched() // give another holder a chance to overlap, were there one
			mu.Lock()
			running--
			done++
			mu.Unlock()
			release()
		})
	}
	for q.users("10.0.0.1") != 1+maxQueuedPerCaller {
		// wait until every request is queued (no time involved: the goroutines only block)
		runtime.Gosched()
	}
	if _, ok := q.acquire(ctx, "10.0.0.1"); ok {
		t.Fatalf("request %d of one caller admitted, want it refused beyond %d queued", 2+maxQueuedPerCaller, maxQueuedPerCaller)
	}
	// A request whose wait ends before its turn is refused and leaves the queue.
	busy, ok := q.acquire(ctx, "10.0.0.3")
	if !ok {
		t.Fatal("first request of 10.0.0.3 refused")
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, ok := q.acquire(cancelled, "10.0.0.3"); ok {
		t.Error("a request whose wait ended was admitted while its caller was busy")
	}
	if n := q.users("10.0.0.3"); n != 1 {
		t.Errorf("10.0.0.3 has %d requests after the refusal, want 1 (the refused one left)", n)
	}
	busy()

	first()
	wg.Wait()
	if done != maxQueuedPerCaller || maxRunning != 1 {
		t.Errorf("%d queued requests ran, at most %d at once; want %d, one at a time", done, maxRunning, maxQueuedPerCaller)
	}
	if n := q.size(); n != 0 {
		t.Errorf("%d callers left in the queue after every request finished, want 0 (no leak)", n)
	}
}

func TestCallerOf(t *testing.T) {
	tests := map[string]string{
		"10.1.2.3:41234":   "10.1.2.3",
		"[fd00::17]:41234": "fd00::17",
		"not-a-host-port":  "not-a-host-port",
		"192.168.0.9:1":    "192.168.0.9",
	}
	for remote, want := range tests {
		r := httptest.NewRequest(http.MethodGet, "/live/namespaces/a/pods/b", nil)
		r.RemoteAddr = remote
		r.Header.Set("X-Forwarded-For", "1.2.3.4")
		if got := callerOf(r); got != want {
			t.Errorf("callerOf(%q) = %q, want %q (never a header)", remote, got, want)
		}
	}
}
