package live

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/emptydir-guard/emptydir-guard/exporter/budget"
	"github.com/emptydir-guard/emptydir-guard/internal/fswalk"
)

// Live walks draw on CPU budgets: a pod that asked for its own volumes back to back held a
// whole core (42.6 CPU-s in 42 s). A budget per caller alone let one tenant spend the
// remediator's, which is one caller for every tenant on the node: its costly over-limit pod,
// re-checked on each Alertmanager retry, got the next tenant's re-check refused. So each
// caller has a budget per namespace of the measured pods (the tenant boundary) and one for
// all its walks:
//
//   - one namespace through one caller: TenantBurst at once, then TenantShare of a core;
//   - one caller in all: CallerBurst at once, then CallerShare of a core, however many
//     namespaces it asks for;
//   - all callers: at most --live.concurrency walks at once (the slots).
//
// So one tenant takes at most TenantShare/CallerShare (a third) of the remediator's
// budget; refusing another tenant's re-check takes three namespaces whose pods are costly to
// walk, re-checked at once. Keying by namespace alone would let any pod spend another
// tenant's budget by asking for its pods, and the remediator's re-checks of them with it.
const (
	TenantShare = 0.1
	TenantBurst = 10 * time.Second
	CallerShare = 0.3
	CallerBurst = 30 * time.Second
	// liveBudgetsKept bounds the budgets remembered, of callers and of their namespaces each;
	// beyond it, those with a full bucket are forgotten (they owe nothing).
	liveBudgetsKept = 1024
)

// Scopes of a live CPU budget: the scope label of live_cpu_budget_refusals_total.
const (
	ScopeNamespace = "namespace"
	ScopeCaller    = "caller"
)

// Budgets holds the CPU budgets of the live callers.
type Budgets struct {
	now     func() time.Time
	mu      sync.Mutex
	callers map[string]*spendBudget
	tenants map[tenantKey]*spendBudget
}

type tenantKey struct{ caller, namespace string }

// spendBudget is a bucket drained by what the walks charged to it spent.
type spendBudget struct {
	spent  atomic.Int64 // CPU nanoseconds its live walks' threads spent
	share  float64
	bucket *budget.Bucket
}

// Budget is what one live walk draws on: its caller's budget for the pod's namespace
// and the caller's budget in all.
type Budget struct{ tenant, caller *spendBudget }

func NewBudgets(now func() time.Time) *Budgets {
	return &Budgets{now: now, callers: map[string]*spendBudget{}, tenants: map[tenantKey]*spendBudget{}}
}

// Of returns the budget of caller's walks of the pods of namespace.
func (l *Budgets) Of(caller, namespace string) Budget {
	l.mu.Lock()
	defer l.mu.Unlock()
	return Budget{
		tenant: budgetIn(l.tenants, tenantKey{caller, namespace}, TenantShare, TenantBurst, l.now),
		caller: budgetIn(l.callers, caller, CallerShare, CallerBurst, l.now),
	}
}

// budgetIn returns the budget of key in m, a full one if m has none, first forgetting the
// full ones when m holds liveBudgetsKept.
func budgetIn[K comparable](m map[K]*spendBudget, key K, share float64, burst time.Duration, now func() time.Time) *spendBudget {
	if b := m[key]; b != nil {
		return b
	}
	if len(m) >= liveBudgetsKept {
		for k, o := range m {
			if o.bucket.Remaining() >= o.bucket.Capacity() {
				delete(m, k)
			}
		}
	}
	b := &spendBudget{share: share}
	b.bucket = budget.New(share, burst, func() time.Duration { return time.Duration(b.spent.Load()) }, now)
	m[key] = b
	return b
}

// Meter charges a live walk's CPU to both budgets.
func (b Budget) Meter() *fswalk.CPUMeter {
	return fswalk.NewCPUMeter(&b.tenant.spent, &b.caller.spent)
}

// Wait is how long the caller must wait before its next live walk of the namespace, and the
// scope of the budget that is spent; 0 when it may walk now.
func (b Budget) Wait() (time.Duration, string) {
	if w := b.tenant.wait(); w > 0 {
		return max(w, b.caller.wait()), ScopeNamespace
	}
	return b.caller.wait(), ScopeCaller
}

// wait is how long until the bucket holds credit again; 0 when it does now.
func (b *spendBudget) wait() time.Duration {
	if b.bucket.Allows(0) {
		return 0
	}
	// At least a nanosecond: an empty bucket (no debt) allows nothing either.
	return max(time.Duration(float64(-b.bucket.Remaining())/b.share), 1)
}
