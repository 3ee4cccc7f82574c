package live

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"testing"
	"time"
)

func (q *Queue) users(caller string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	if t := q.callers[caller]; t != nil {
		return t.users
	}
	return 0
}

func TestCallerQueue(t *testing.T) {
	q := NewQueue(1)
	ctx := context.Background()
	first, ok := q.Acquire(ctx, "10.0.0.1", "a", "pod")
	if !ok {
		t.Fatal("first request of a caller refused")
	}
	// Another caller is not behind this one.
	other, ok := q.Acquire(ctx, "10.0.0.2", "a", "pod")
	if !ok {
		t.Fatal("a second caller waits for the first")
	}
	other()

	// The caller's further requests queue, up to the bound.
	const queued = maxQueuedPerCaller - 1
	var wg sync.WaitGroup
	var mu sync.Mutex
	running, maxRunning, done := 0, 0, 0
	for i := range queued {
		wg.Go(func() {
			release, ok := q.Acquire(ctx, "10.0.0.1", []string{"a", "b"}[i%2], "pod")
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
	for q.users("10.0.0.1") != maxQueuedPerCaller {
		// wait until every request is queued (no time involved: the goroutines only block)
		runtime.Gosched()
	}
	if _, ok := q.Acquire(ctx, "10.0.0.1", "c", "pod"); ok {
		t.Fatalf("request %d of one caller admitted, want it refused beyond %d running or queued", 1+maxQueuedPerCaller, maxQueuedPerCaller)
	}
	// A request whose wait ends before its turn is refused and leaves the queue.
	busy, ok := q.Acquire(ctx, "10.0.0.3", "a", "pod")
	if !ok {
		t.Fatal("first request of 10.0.0.3 refused")
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, ok := q.Acquire(cancelled, "10.0.0.3", "a", "pod"); ok {
		t.Error("a request whose wait ended was admitted while its caller was busy")
	}
	if n := q.users("10.0.0.3"); n != 1 {
		t.Errorf("10.0.0.3 has %d requests after the refusal, want 1 (the refused one left)", n)
	}
	busy()

	first()
	wg.Wait()
	if done != queued || maxRunning != 1 {
		t.Errorf("%d queued requests ran, at most %d at once; want %d, one at a time", done, maxRunning, queued)
	}
	if n := q.size(); n != 0 {
		t.Errorf("%d callers left in the queue after every request finished, want 0 (no leak)", n)
	}
}

// TestCallerQueuePerPod: a caller measures up to perCaller pods at once, each one at a time:
// one slow pod no longer holds the caller's only turn (issue 18, item 7), and the caller
// still cannot take every slot.
func TestCallerQueuePerPod(t *testing.T) {
	q := NewQueue(2)
	ctx := context.Background()
	slow, ok := q.Acquire(ctx, "10.0.0.7", "a", "slow")
	if !ok {
		t.Fatal("first request refused")
	}
	expired, cancel := context.WithCancel(ctx)
	cancel()
	if _, ok := q.Acquire(expired, "10.0.0.7", "a", "slow"); ok {
		t.Error("a second request for the pod being measured ran beside it, want it to wait its turn")
	}
	other, ok := q.Acquire(ctx, "10.0.0.7", "b", "other")
	if !ok {
		t.Fatal("another pod of the same caller waits for the slow one, want it measured beside it")
	}
	if _, ok := q.Acquire(expired, "10.0.0.7", "c", "third"); ok {
		t.Error("a third pod ran while the caller measures two, want at most perCaller=2 at once")
	}
	other()
	third, ok := q.Acquire(ctx, "10.0.0.7", "c", "third")
	if !ok {
		t.Fatal("a third pod refused once the caller measures one")
	}
	third()
	slow()
	if n := q.size(); n != 0 {
		t.Errorf("%d callers left after every request finished, want 0", n)
	}
}

// TestCallerQueuePerTenant: one namespace's pods hold at most perCaller - 1 of a caller's
// turns and maxQueuedPerCaller - 1 of its places, so that a tenant's slow pods, re-checked on
// every retry, cannot hold all of the remediator's turns on the node (issue 30, item 4).
func TestCallerQueuePerTenant(t *testing.T) {
	q := NewQueue(3)
	ctx := context.Background()
	expired, cancel := context.WithCancel(ctx)
	cancel()
	// A request expected to get its turn at once waits at most this long, so that a wrong
	// answer fails instead of hanging.
	patient, stop := context.WithTimeout(ctx, 10*time.Second)
	defer stop()
	var releases []func()
	for _, pod := range []string{"slow-0", "slow-1"} {
		release, ok := q.Acquire(ctx, "10.0.0.7", "tenant-a", pod)
		if !ok {
			t.Fatalf("tenant-a's %s refused while the caller has free turns", pod)
		}
		releases = append(releases, release)
	}
	if _, ok := q.Acquire(expired, "10.0.0.7", "tenant-a", "slow-2"); ok {
		t.Error("tenant-a's third pod took the caller's last turn, want at most perCaller-1 = 2 per namespace")
	}
	b, ok := q.Acquire(patient, "10.0.0.7", "tenant-b", "web-0")
	if !ok {
		t.Fatal("tenant-b's pod waits for tenant-a's, want it measured on the turn left")
	}
	b()
	// Waiting places: tenant-a fills all but one.
	waiting := make(chan bool, maxQueuedPerTenant)
	for i := range maxQueuedPerTenant - 2 {
		go func() {
			release, ok := q.Acquire(ctx, "10.0.0.7", "tenant-a", fmt.Sprintf("wait-%d", i))
			if ok {
				release()
			}
			waiting <- ok
		}()
	}
	for q.users("10.0.0.7") != maxQueuedPerTenant {
		runtime.Gosched() // the goroutines only block
	}
	if _, ok := q.Acquire(ctx, "10.0.0.7", "tenant-a", "one-more"); ok {
		t.Errorf("tenant-a admitted beyond %d requests running or waiting", maxQueuedPerTenant)
	}
	b, ok = q.Acquire(patient, "10.0.0.7", "tenant-b", "web-0")
	if !ok {
		t.Fatal("tenant-b refused while tenant-a holds all its places: want the place left for it")
	}
	b()
	for _, r := range releases {
		r()
	}
	for range maxQueuedPerTenant - 2 {
		if !<-waiting {
			t.Error("a waiting request of tenant-a was refused")
		}
	}
	if n := q.size(); n != 0 {
		t.Errorf("%d callers left after every request finished, want 0", n)
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
		if got := CallerOf(r); got != want {
			t.Errorf("CallerOf(%q) = %q, want %q (never a header)", remote, got, want)
		}
	}
}
