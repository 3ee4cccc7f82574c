package live

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emptydir-guard/emptydir-guard/exporter/budget"
	"github.com/emptydir-guard/emptydir-guard/internal/fswalk"
)

// Live walks draw on two CPU budgets of each caller: one per namespace of the measured pods
// (the tenant boundary), TenantBurst at once then TenantShare of a core, and one for all its
// walks, CallerBurst then CallerShare. A walk starts only while both hold what its parts last
// cost, and is cut once either holds less than nothing (Budget.Admit), so that no tenant's
// costly pod spends another's re-checks. The reasons and bounds: docs/exporter.md, "Live CPU
// budgets".
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

// ErrCut is the cause of the context of a live walk that exhausted a budget it draws on
// (Budget.Admit): the walk ends there, cut short, its count a lower bound.
var ErrCut = errors.New("live walk cut: it spent what its caller's live CPU budget held for it")

// Budgets holds the CPU budgets of the live callers.
type Budgets struct {
	now func() time.Time
	// all adds up what every live walk spent: the process's CPU budget leaves it out, since
	// these budgets bound it (Exporter: a tenant provoking re-checks must not defer the
	// periodic walks of the other namespaces).
	all     atomic.Int64
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
type Budget struct {
	tenant, caller *spendBudget
	all            *atomic.Int64
}

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
		all:    &l.all,
	}
}

// Spent is the CPU time every live walk on these budgets has spent so far.
func (l *Budgets) Spent() time.Duration { return time.Duration(l.all.Load()) }

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

// Walk is one live walk admitted on a Budget. Its meter charges both budgets as the walk's
// threads go, and cuts the walk as soon as either holds less than nothing: it has spent what
// the budget held (shared with the caller's other walks on it). So one walk, however costly
// (a tenant's millions of files, up to LiveTimeout × the walk's concurrency of CPU), never
// takes a budget into debt beyond what its threads spend between two charges: the caller's
// budget in all keeps its credit for the other namespaces' walks.
type Walk struct {
	meter *fswalk.CPUMeter
	// cutBy is the scope of the budget whose credit the walk exhausted; "" while not cut.
	cutBy atomic.Pointer[string]
}

// Admit admits a live walk expected to cost estimate (what its parts' last walks cost; 0: not
// known) when each budget holds more than 0 and at least min(estimate, its capacity): a walk
// whose cost is known starts when it can run to its end, not to be cut at once. cut is called,
// once, when the walk has exhausted either budget. Otherwise Admit returns nil, how long the
// caller should wait, and the scope of the budget that lacks credit (ScopeNamespace when both
// do).
func (b Budget) Admit(estimate time.Duration, cut func()) (*Walk, time.Duration, string) {
	tenantWait, callerWait := b.tenant.waitFor(estimate), b.caller.waitFor(estimate)
	switch {
	case tenantWait > 0:
		return nil, max(tenantWait, callerWait), ScopeNamespace
	case callerWait > 0:
		return nil, callerWait, ScopeCaller
	}
	w := &Walk{}
	w.meter = fswalk.NewCPUMeter(&b.tenant.spent, &b.caller.spent, b.all).CutWhen(func() bool {
		scope := ScopeNamespace
		switch {
		case b.tenant.bucket.Remaining() < 0:
		case b.caller.bucket.Remaining() < 0:
			scope = ScopeCaller
		default:
			return false
		}
		w.cutBy.Store(&scope)
		return true
	}, cut)
	return w, 0, ""
}

// Meter charges the walk's CPU to both budgets, and cuts it once it has exhausted either.
func (w *Walk) Meter() *fswalk.CPUMeter { return w.meter }

// Cut reports whether the walk was cut, and the scope of the budget it exhausted.
func (w *Walk) Cut() (bool, string) {
	if scope := w.cutBy.Load(); scope != nil {
		return true, *scope
	}
	return false, ""
}

// waitFor is how long until the bucket allows a walk expected to cost estimate (its credit
// over 0 and at least min(estimate, capacity)), at its share; 0 when it does now.
func (b *spendBudget) waitFor(estimate time.Duration) time.Duration {
	need, left := min(estimate, b.bucket.Capacity()), b.bucket.Remaining()
	if left > 0 && left >= need {
		return 0
	}
	// At least a nanosecond: an empty bucket (no debt) allows nothing either.
	return max(time.Duration(float64(need-left)/b.share), 1)
}
