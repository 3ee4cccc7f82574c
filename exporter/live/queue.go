package live

import (
	"context"
	"net"
	"net/http"
	"sync"
)

// maxQueuedPerCaller bounds the requests one caller may have running or waiting; beyond it
// the caller is refused at once instead of holding more goroutines. One namespace's pods
// may have all of them but one, so that one tenant's retries leave the others a place.
const (
	maxQueuedPerCaller = 5
	maxQueuedPerTenant = maxQueuedPerCaller - 1
)

// Queue lets each caller run live measurements of up to perCaller pods at a time, up
// to perTenant of them of one namespace, one at a time per pod, the others waiting in arrival
// order as far as Go's channel wake-ups go. One per caller would let one slow pod (a tenant
// can make its volume slow to walk, and its over-limit alert is delivered again and again)
// hold the remediator's only turn on a node, so that re-checks of every other pod there were
// refused; all per caller would let one tenant's few slow pods do the same.
type Queue struct {
	perCaller, perTenant int
	mu                   sync.Mutex
	callers              map[string]*callerTurn
}

type callerTurn struct {
	running chan struct{}    // capacity perCaller: held by the requests that measure
	tenants map[string]*turn // by namespace: running of capacity perTenant
	pods    map[string]*turn // running of capacity 1 each: held by the request measuring that pod
	users   int              // requests running or waiting; the entry goes at 0
}

// turn is a bounded number of requests running, and those running or waiting (users).
type turn struct {
	running chan struct{}
	users   int
}

func NewQueue(perCaller int) *Queue {
	perCaller = max(1, perCaller)
	return &Queue{perCaller: perCaller, perTenant: max(1, perCaller-1), callers: map[string]*callerTurn{}}
}

// PerCaller is how many pods one caller may have measured at a time.
func (q *Queue) PerCaller() int { return q.perCaller }

// PerTenant is how many pods of one namespace one caller may have measured at a time.
func (q *Queue) PerTenant() int { return q.perTenant }

// Acquire waits for caller's turn to measure pod, of namespace, until ctx ends. It returns
// false when the caller, or the namespace through it, already has too many requests running
// or waiting, or ctx ended first; otherwise release must be called.
func (q *Queue) Acquire(ctx context.Context, caller, namespace, pod string) (release func(), ok bool) {
	q.mu.Lock()
	t := q.callers[caller]
	if t == nil {
		t = &callerTurn{running: make(chan struct{}, q.perCaller), tenants: map[string]*turn{}, pods: map[string]*turn{}}
		q.callers[caller] = t
	}
	tenant := t.tenants[namespace]
	if t.users >= maxQueuedPerCaller || (tenant != nil && tenant.users >= maxQueuedPerTenant) {
		q.mu.Unlock()
		return nil, false
	}
	if tenant == nil {
		tenant = &turn{running: make(chan struct{}, q.perTenant)}
		t.tenants[namespace] = tenant
	}
	podTurn := t.pods[pod]
	if podTurn == nil {
		podTurn = &turn{running: make(chan struct{}, 1)}
		t.pods[pod] = podTurn
	}
	t.users++
	tenant.users++
	podTurn.users++
	q.mu.Unlock()

	leave := func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		if podTurn.users--; podTurn.users == 0 {
			delete(t.pods, pod)
		}
		if tenant.users--; tenant.users == 0 {
			delete(t.tenants, namespace)
		}
		if t.users--; t.users == 0 {
			delete(q.callers, caller)
		}
	}
	// In this order only, the pod's turn first, so that no two requests wait for each other.
	var held []chan struct{}
	for _, running := range []chan struct{}{podTurn.running, tenant.running, t.running} {
		select {
		case running <- struct{}{}:
			held = append(held, running)
		case <-ctx.Done():
			for _, h := range held {
				<-h
			}
			leave()
			return nil, false
		}
	}
	return func() {
		for _, h := range held {
			<-h
		}
		leave()
	}, true
}

// size is the number of callers with requests running or waiting.
func (q *Queue) size() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.callers)
}

// CallerOf identifies the caller by its remote IP: pods reach the exporter directly, not
// through a proxy, and a header such as X-Forwarded-For would be the caller's to choose.
func CallerOf(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
