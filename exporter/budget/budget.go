package budget

import (
	"sync"
	"time"
)

// Bucket is the token bucket of --collection.cpu-budget: it fills at share CPU-seconds per
// wall second up to capacity, and the periodic walks' CPU drains it. A walk starts only while
// it holds credit and may overdraw it by up to one bucket. Overdue walks start on their
// namespace's part of the floor instead (schedule.Floor); their cost is a debt the income pays
// first and never forgives, so all the walks stay within share of a core over time. Only the
// walks are charged, as their threads count it (fswalk.CPUMeter): charging scrapes would let a
// scraper starve the walks (docs/exporter.md, "What it costs a node").
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
