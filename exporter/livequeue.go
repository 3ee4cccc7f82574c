package exporter

import (
	"context"
	"net"
	"net/http"
	"sync"
)

// maxQueuedPerCaller bounds the requests one caller may have waiting behind its running
// one; beyond it the caller is refused at once instead of holding more goroutines.
const maxQueuedPerCaller = 4

// callerQueue lets each caller run one live measurement at a time, the others waiting in
// arrival order as far as Go's channel wake-ups go.
type callerQueue struct {
	mu      sync.Mutex
	callers map[string]*callerTurn
}

type callerTurn struct {
	running chan struct{} // capacity 1: held by the request that measures
	users   int           // requests running or waiting; the entry goes at 0
}

func newCallerQueue() *callerQueue { return &callerQueue{callers: map[string]*callerTurn{}} }

// acquire waits for caller's turn until ctx ends. It returns false when the caller already
// has too many requests waiting or ctx ended first; otherwise release must be called.
func (q *callerQueue) acquire(ctx context.Context, caller string) (release func(), ok bool) {
	q.mu.Lock()
	t := q.callers[caller]
	if t == nil {
		t = &callerTurn{running: make(chan struct{}, 1)}
		q.callers[caller] = t
	}
	if t.users > maxQueuedPerCaller {
		q.mu.Unlock()
		return nil, false
	}
	t.users++
	q.mu.Unlock()

	leave := func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		if t.users--; t.users == 0 {
			delete(q.callers, caller)
		}
	}
	select {
	case t.running <- struct{}{}:
		return func() { <-t.running; leave() }, true
	case <-ctx.Done():
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
