package exporter

import (
	"sync"
	"time"
)

// cpuBudget is the token bucket of Config.CPUBudget (--collection.cpu-budget): it bounds the
// CPU the periodic walks spend, as a bucket of CPU time that fills at share (the CPUBudget)
// CPU-seconds per wall second up to capacity, and the walks' CPU drains it. The collection
// starts a walk only while the bucket holds credit; a walk may overdraw it, and the debt (up to
// one bucket) is paid back by later cycles, so over time the walks stay within share of one
// core, but for the walks of volumes with a sizeLimit that dueWalks starts whatever the bucket
// holds, at most one per volume every --collection.unlimited-interval.
//
// It charges the walks only, each as the threads that walked counted it (fswalk.CPUMeter),
// not the process: scrapes, live measurements and the Go runtime are not walks the budget can defer,
// and charging them would let a scraper polling /metrics starve the walks (at a 1 s interval
// with frequent scrapes they drained the bucket, and volumes without a sizeLimit waited for
// minutes). What a walk's threads miss (garbage collection on other threads; the walker
// allocates nothing per entry) is measured against the process's CPU in docs/performance.md.
type cpuBudget struct {
	share    float64 // Config.CPUBudget
	capacity time.Duration
	// spent reads the CPU time every metered walk has spent so far.
	spent func() time.Duration
	now   func() time.Time

	mu        sync.Mutex
	credit    time.Duration
	lastWall  time.Time
	lastSpent time.Duration
}

// newCPUBudget returns a full bucket of capacity for share of one core, drained by spent.
func newCPUBudget(share float64, capacity time.Duration, spent func() time.Duration, now func() time.Time) *cpuBudget {
	return &cpuBudget{share: share, capacity: capacity, spent: spent, now: now,
		credit: capacity, lastWall: now(), lastSpent: spent()}
}

// update fills the bucket for the time passed and drains what the walks spent since the
// last update. Callers hold b.mu.
func (b *cpuBudget) update() {
	wall, spent := b.now(), b.spent()
	b.credit += time.Duration(b.share*float64(max(0, wall.Sub(b.lastWall)))) - max(0, spent-b.lastSpent)
	// A debt beyond one bucket is forgiven: one walk costlier than the bucket (a tenant's
	// millions of empty files) must not keep every walk waiting for minutes; that volume
	// itself waits for a full bucket before its next walk (dueWalks).
	b.credit = max(min(b.credit, b.capacity), -b.capacity)
	b.lastWall, b.lastSpent = wall, spent
}

// remaining is the credit now: CPU time the collection may still start walks on, negative
// while a walk's overdraft is being paid back.
func (b *cpuBudget) remaining() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.update()
	return b.credit
}

// allows reports whether the bucket allows a walk expected to cost cost (0: start on any
// credit) to start now. It allows one while it holds more than min(cost, capacity): a walk
// whose cost is known never takes more than the bucket holds, so it cannot overdraw it into
// the next cycles (whose walks of limited volumes would then be deferred), and one costlier
// than a full bucket still runs when the bucket is full.
func (b *cpuBudget) allows(cost time.Duration) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.update()
	return b.credit > 0 && b.credit >= min(cost, b.capacity)
}
