package schedule

import (
	"sync"
	"time"
)

// Floor is what the walks of overdue volumes (Walk.Floor) start on, whatever the
// CPU budget's bucket holds, so that no volume waits for credit forever: the budget's share of
// a core split evenly among the namespaces of the node's pods, each namespace's part saved up
// to its part of one bucket. A namespace's floor walks are charged to its part alone, so
// however many volumes one namespace has, or however costly their walks, what it spends there
// is its part of the share over time, and once its part is spent its own overdue walks wait,
// not another namespace's. What they spend is also a debt of the bucket, which its income pays
// first and which is never forgiven (budget.Bucket): these parts, adding up to the budget's share,
// keep all the walks within that share over time.
type Floor struct {
	share    float64       // Config.CPUBudget
	capacity time.Duration // the budget's bucket
	now      func() time.Time

	mu       sync.Mutex
	lastFill time.Time
	listed   int // namespaces the last fill split the share among
	accounts map[string]*floorAccount
}

// floorAccount is one namespace's part of the floor.
type floorAccount struct {
	// credit is what its floor walks may still start on, less the estimates of those under
	// way; negative while a walk that cost more than it held is paid back.
	credit time.Duration
	// walking counts its floor walks under way.
	walking int
}

// NewFloor returns the floor of a budget of share of a core and a bucket of capacity,
// every part empty.
func NewFloor(share float64, capacity time.Duration, now func() time.Time) *Floor {
	return &Floor{share: share, capacity: capacity, now: now, lastFill: now(), accounts: map[string]*floorAccount{}}
}

// Fill credits each namespace of the cycle's pods its part of the share for the time since
// the last Fill, up to its part of the bucket. A namespace no longer listed is forgotten once
// it owes nothing and has no floor walk under way; one in debt keeps paying it at the same
// pace, so that leaving the node and coming back does not clear a debt.
func (f *Floor) Fill(namespaces map[string]bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	elapsed := max(0, now.Sub(f.lastFill))
	f.lastFill = now
	f.listed = len(namespaces)
	if f.listed == 0 {
		return
	}
	part := time.Duration(f.share * float64(elapsed) / float64(f.listed))
	for ns, a := range f.accounts {
		if namespaces[ns] {
			a.credit = min(a.credit+part, f.Bucket())
			continue
		}
		a.credit = min(a.credit+part, max(a.credit, 0))
		if a.credit >= 0 && a.walking == 0 {
			delete(f.accounts, ns)
		}
	}
	for ns := range namespaces {
		if f.accounts[ns] == nil {
			f.accounts[ns] = &floorAccount{} // saves up from now on
		}
	}
}

// Bucket is what one namespace's part saves up to: its part of the budget's bucket. Callers
// hold f.mu.
func (f *Floor) Bucket() time.Duration {
	return f.capacity / time.Duration(max(1, f.listed))
}

// Take reports whether a walk of namespace ns expected to cost estimate may start without
// the budget's credit: while ns's part holds credit and at least min(estimate, its bucket), as
// budget.Bucket.Allows. The estimate is then set aside until the walk ends (Settle), so that the
// walks ns starts in one cycle cannot all start on the same credit.
func (f *Floor) Take(ns string, estimate time.Duration) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	a := f.accounts[ns]
	if a == nil || a.credit <= 0 || a.credit < min(estimate, f.Bucket()) {
		return false
	}
	a.credit -= estimate
	a.walking++
	return true
}

// Settle charges ns's part what a floor walk that Take let start spent, in place of its
// estimate.
func (f *Floor) Settle(ns string, estimate, spent time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a := f.accounts[ns]
	if a == nil { // not forgotten while walking; only a programming error gets here
		a = &floorAccount{walking: 1}
		f.accounts[ns] = a
	}
	a.credit += estimate - spent
	a.walking--
}

// Estimate is what a floor walk of a volume is expected to cost: its last walk's, or, never
// walked to the end, a whole part of the bucket (Take then waits for a full part).
func (f *Floor) Estimate(s State) time.Duration {
	if s.Measured {
		return s.Cost
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.Bucket()
}
