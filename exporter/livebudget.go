package exporter

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/emptydir-guard/emptydir-guard/internal/fswalk"
)

// Each caller's live walks draw on a CPU budget of their own: a pod that asks for its own
// volumes back to back held a whole core (42.6 CPU-s in 42 s). A caller may spend
// liveCallerBurst at once, then liveCallerShare of a core; the remediator's re-checks, a
// few walks per alert, stay far below.
const (
	liveCallerShare = 0.1
	liveCallerBurst = 10 * time.Second
	// liveBudgetsKept bounds the callers remembered; beyond it, those with a full bucket are
	// forgotten (they owe nothing).
	liveBudgetsKept = 1024
)

// liveBudgets holds the CPU budget of each live caller.
type liveBudgets struct {
	now func() time.Time
	mu  sync.Mutex
	m   map[string]*callerBudget
}

type callerBudget struct {
	spent  atomic.Int64 // CPU nanoseconds its live walks' threads spent
	bucket *cpuBudget
}

func newLiveBudgets(now func() time.Time) *liveBudgets {
	return &liveBudgets{now: now, m: map[string]*callerBudget{}}
}

// of returns caller's budget.
func (l *liveBudgets) of(caller string) *callerBudget {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.m[caller]
	if b == nil {
		if len(l.m) >= liveBudgetsKept {
			for c, o := range l.m {
				if o.bucket.remaining() >= liveCallerBurst {
					delete(l.m, c)
				}
			}
		}
		b = &callerBudget{}
		b.bucket = newCPUBudget(liveCallerShare, liveCallerBurst, func() time.Duration { return time.Duration(b.spent.Load()) }, l.now)
		l.m[caller] = b
	}
	return b
}

// meter charges a live walk's CPU to the caller.
func (b *callerBudget) meter() *fswalk.CPUMeter { return fswalk.NewCPUMeter(&b.spent) }

// wait is how long the caller must wait before its next live walk; 0 when it may walk now.
func (b *callerBudget) wait() time.Duration {
	if b.bucket.allows(0) {
		return 0
	}
	return time.Duration(float64(-b.bucket.remaining()) / liveCallerShare)
}
