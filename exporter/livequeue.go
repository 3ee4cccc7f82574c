package exporter

import (
	"context"
	"net"
	"net/http"
	"sync"
)

// maxQueuedPerCaller bounds the requests one caller may have running or waiting; beyond it
// the caller is refused at once instead of holding more goroutines.
const maxQueuedPerCaller = 5

// callerQueue lets each caller run live measurements of up to perCaller pods at a time, one
// at a time per pod, the others waiting in arrival order as far as Go's channel wake-ups go.
// One per caller would let one slow pod (a tenant can make its volume slow to walk, and its
// over-limit alert is delivered again and again) hold the remediator's only turn on a node,
// so that re-checks of every other pod there were refused.
type callerQueue struct {
	perCaller int
	mu        sync.Mutex
	callers   map[string]*callerTurn
}

type callerTurn struct {
	running chan struct{}            // capacity perCaller: held by the requests that measure
	pods    map[string]chan struct{} // capacity 1 each: held by the request measuring that pod
	users   int                      // requests running or waiting; the entry goes at 0
	perPod  map[string]int           // the same, by pod
}

func newCallerQueue(perCaller int) *callerQueue {
	return &callerQueue{perCaller: max(1, perCaller), callers: map[string]*callerTurn{}}
}

// acquire waits for caller's turn to measure pod until ctx ends. It returns false when the
// caller already has too many requests running or waiting, or ctx ended first; otherwise
// release must be called.
func (q *callerQueue) acquire(ctx context.Context, caller, pod string) (release func(), ok bool) {
	q.mu.Lock()
	t := q.callers[caller]
	if t == nil {
		t = &callerTurn{running: make(chan struct{}, q.perCaller), pods: map[string]chan struct{}{}, perPod: map[string]int{}}
		q.callers[caller] = t
	}
	if t.users >= maxQueuedPerCaller {
		q.mu.Unlock()
		return nil, false
	}
	t.users++
	t.perPod[pod]++
	podTurn := t.pods[pod]
	if podTurn == nil {
		podTurn = make(chan struct{}, 1)
		t.pods[pod] = podTurn
	}
	q.mu.Unlock()

	leave := func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		if t.perPod[pod]--; t.perPod[pod] == 0 {
			delete(t.perPod, pod)
			delete(t.pods, pod)
		}
		if t.users--; t.users == 0 {
			delete(q.callers, caller)
		}
	}
	select {
	case podTurn <- struct{}{}:
	case <-ctx.Done():
		leave()
		return nil, false
	}
	select {
	case t.running <- struct{}{}:
		return func() { <-t.running; <-podTurn; leave() }, true
	case <-ctx.Done():
		<-podTurn
		leave()
		return nil, false
	}
}

// size is the number of callers with requests running or waiting.
func (q *callerQueue) size() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.callers)
}

// callerOf identifies the caller by its remote IP: pods reach the exporter directly, not
// through a proxy, and a header such as X-Forwarded-For would be the caller's to choose.
func callerOf(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
