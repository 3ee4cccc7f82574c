package budget

import (
	"sync"
	"time"
)

// Bucket is the token bucket of --collection.cpu-budget: it fills at share CPU-seconds per
// wall second up to capacity, and what spent reads drains it: the exporter's whole process
// but its floor walks, or (without a process reading) the walks on credit as their threads
// count them (fswalk.CPUMeter). A walk starts only while it holds credit and may overdraw it
// by up to one bucket. Overdue walks start on their namespace's part of the floor instead
// (Floor), so that nothing else the process spends can starve them; their cost is a debt the
// income pays first and never forgives, so the process stays within share of a core over time
// (docs/exporter.md, "What it costs a node").
type Bucket struct {
	share    float64 // Config.CPUBudget
	capacity time.Duration
	// spent reads the CPU time charged to the bucket's credit so far, floorSpent what the
	// walks started on the floor have spent.
	spent, floorSpent func() time.Duration
	now               func() time.Time

	mu     sync.Mutex
	credit time.Duration
	// floorDebt is what the floor walks spent that the bucket's income has not paid yet.
	floorDebt                 time.Duration
	lastWall                  time.Time
	lastSpent, lastFloorSpent time.Duration
}

// New returns a full bucket of capacity for share of one core, drained by spent.
func New(share float64, capacity time.Duration, spent func() time.Duration, now func() time.Time) *Bucket {
	return &Bucket{share: share, capacity: capacity, spent: spent, floorSpent: func() time.Duration { return 0 },
		now: now, credit: capacity, lastWall: now(), lastSpent: spent()}
}

// WithFloor makes b owe what floorSpent reads: the CPU time the floor walks spend.
func (b *Bucket) WithFloor(floorSpent func() time.Duration) *Bucket {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.floorSpent, b.lastFloorSpent = floorSpent, floorSpent()
	return b
}

// update fills the bucket for the time passed, paying the floor walks' debt first, and
// drains what the walks on credit spent since the last update. Callers hold b.mu.
func (b *Bucket) update() {
	wall, spent, floorSpent := b.now(), b.spent(), b.floorSpent()
	income := time.Duration(b.share * float64(max(0, wall.Sub(b.lastWall))))
	b.floorDebt += max(0, floorSpent-b.lastFloorSpent)
	paid := min(income, b.floorDebt)
	b.floorDebt -= paid
	b.credit += income - paid - max(0, spent-b.lastSpent)
	// A debt beyond one bucket is forgiven: one walk costlier than the bucket (a tenant's
	// millions of empty files) must not keep every walk waiting for minutes; that volume
	// itself waits for a full bucket before its next walk (schedule.Due).
	b.credit = max(min(b.credit, b.capacity), -b.capacity)
	b.lastWall, b.lastSpent, b.lastFloorSpent = wall, spent, floorSpent
}

// Remaining is the credit now: CPU time the collection may still start walks on, negative
// while a walk's overdraft or the floor walks' debt is being paid back.
func (b *Bucket) Remaining() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.update()
	return b.credit - b.floorDebt
}

// Share is the share of one core the bucket fills at.
func (b *Bucket) Share() float64 { return b.share }

// Capacity is what a full bucket holds.
func (b *Bucket) Capacity() time.Duration { return b.capacity }

// Allows reports whether the bucket allows a walk expected to cost cost (0: start on any
// credit) to start now. It allows one while it holds more than min(cost, capacity): a walk
// whose cost is known never takes more than the bucket holds, so it cannot overdraw it into
// the next cycles (whose walks of limited volumes would then be deferred), and one costlier
// than a full bucket still runs when the bucket is full.
func (b *Bucket) Allows(cost time.Duration) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.update()
	left := b.credit - b.floorDebt
	return left > 0 && left >= min(cost, b.capacity)
}

// Floor is what the walks of overdue volumes (schedule.Walk.Floor) start on, whatever the
// CPU budget's bucket holds, so that no volume waits for credit forever: the budget's share of
// a core split evenly among the namespaces of the node's pods, each namespace's part saved up
// to its part of one bucket. A namespace's floor walks are charged to its part alone, so
// however many volumes one namespace has, or however costly their walks, what it spends there
// is its part of the share over time, and once its part is spent its own overdue walks wait,
// not another namespace's. What they spend is also a debt of the bucket, which its income pays
// first and which is never forgiven (Bucket): these parts, adding up to the budget's share,
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
// Bucket.Allows. The estimate is then set aside until the walk ends (Settle), so that the
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

// Estimate is what a floor walk of a volume is expected to cost: lastCost, what its last
// complete walk cost (measured), or, never walked to the end, a whole part of the bucket (Take
// then waits for a full part).
func (f *Floor) Estimate(lastCost time.Duration, measured bool) time.Duration {
	if measured {
		return lastCost
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.Bucket()
}
