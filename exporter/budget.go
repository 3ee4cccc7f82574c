package exporter

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// cpuBudget bounds the CPU the periodic walks spend, as a token bucket of CPU time: it fills
// at share CPU-seconds per wall second up to capacity, and the walks' CPU drains it. The
// collection starts a walk only while the bucket holds credit; a walk may overdraw it, and
// the debt is paid back by later cycles, so over time the walks stay within share of one core.
//
// It charges the walks only, each as the threads that walked counted it (cpuMeter), not the
// process: scrapes, live measurements and the Go runtime are not walks the budget can defer,
// and charging them would let a scraper polling /metrics starve the walks (at a 1 s interval
// with frequent scrapes they drained the bucket, and volumes without a sizeLimit waited for
// minutes). What a walk's threads miss (garbage collection on other threads; the walker
// allocates nothing per entry) is measured against the process's CPU in docs/performance.md.
type cpuBudget struct {
	share    float64
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
	b.credit = min(b.credit, b.capacity)
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

// cpuMeter adds up the CPU time one walk spent, as the threads that walked counted it, and
// adds it to a total of all walks (what the budget drains) as it goes.
type cpuMeter struct {
	walk  atomic.Int64
	total *atomic.Int64 // nil: no total
}

// add charges d of CPU time to the walk.
func (m *cpuMeter) add(d time.Duration) {
	m.walk.Add(int64(d))
	if m.total != nil {
		m.total.Add(int64(d))
	}
}

// spent is the CPU time charged to the walk so far.
func (m *cpuMeter) spent() time.Duration { return time.Duration(m.walk.Load()) }

type cpuMeterKey struct{}

// withCPUMeter returns ctx carrying m, so that the walk started under it charges its CPU
// there, through the source's call, whatever the source.
func withCPUMeter(ctx context.Context, m *cpuMeter) context.Context {
	return context.WithValue(ctx, cpuMeterKey{}, m)
}

// cpuMeterOf is the meter ctx carries; nil when its walk is metered by nobody (a live
// measurement, a benchmark).
func cpuMeterOf(ctx context.Context) *cpuMeter {
	m, _ := ctx.Value(cpuMeterKey{}).(*cpuMeter)
	return m
}

// threadMeter meters one walking goroutine: it locks the goroutine to its OS thread, so that
// the thread's CPU clock counts this goroutine's work (its system calls included) and no
// other's, and charges what the clock advanced to the meter, every threadMeterEvery ticks
// and when stopped, so that the budget sees a long walk as it goes.
type threadMeter struct {
	m     *cpuMeter
	last  time.Duration
	ticks int
}

// threadMeterEvery is how many folders or batches a walking goroutine reads between two
// readings of its thread's CPU clock: a reading is a system call (the vDSO does not serve
// thread clocks), small next to a folder's 4 or more, and rarer still this way.
const threadMeterEvery = 32

// startThreadMeter starts metering the calling goroutine for m; nil m meters nothing.
func startThreadMeter(m *cpuMeter) threadMeter {
	if m == nil {
		return threadMeter{}
	}
	runtime.LockOSThread()
	return threadMeter{m: m, last: threadCPU()}
}

// tick charges the thread's CPU to the meter every threadMeterEvery calls.
func (t *threadMeter) tick() {
	if t.m == nil {
		return
	}
	if t.ticks++; t.ticks >= threadMeterEvery {
		t.ticks = 0
		t.flush()
	}
}

// stop charges the rest and unlocks the goroutine from its thread.
func (t *threadMeter) stop() {
	if t.m == nil {
		return
	}
	t.flush()
	runtime.UnlockOSThread()
}

func (t *threadMeter) flush() {
	now := threadCPU()
	t.m.add(now - t.last)
	t.last = now
}

// threadCPU is the CPU time, user and system, the calling OS thread has spent.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0 // cannot happen on Linux; reading 0 then charges nothing
	}
	return time.Duration(ts.Nano())
}
