package budget

import (
	"sync"
	"time"
)

// Bucket is the token bucket of the exporter's Config.CPUBudget (--collection.cpu-budget): it bounds the
// CPU the periodic walks spend, as a bucket of CPU time that fills at share (the CPUBudget)
// CPU-seconds per wall second up to capacity, and the walks' CPU drains it. The collection
// starts a walk only while the bucket holds credit; a walk may overdraw it, and the debt (up to
// one bucket) is paid back by later cycles. The walks of overdue volumes start on their
// namespace's part of the floor instead (schedule.Floor), whatever the bucket holds; what they
// spend is a debt of its own, never forgiven, that the bucket's income pays first: since the
// namespaces' parts add up to share, over time all the walks stay within share of one core.
//
// It charges the walks only, each as the threads that walked counted it (fswalk.CPUMeter),
// not the process: scrapes, live measurements and the Go runtime are not walks the budget can defer,
// and charging them would let a scraper polling /metrics starve the walks (at a 1 s interval
// with frequent scrapes they drained the bucket, and volumes without a sizeLimit waited for
// minutes). What a walk's threads miss (garbage collection on other threads; the walker
// allocates nothing per entry) is measured against the process's CPU in docs/performance.md.
type Bucket struct {
	share    float64 // Config.CPUBudget
	capacity time.Duration
	// spent and floorSpent read the CPU time the walks started on the bucket's credit, and
	// those started on the floor, have spent so far.
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
