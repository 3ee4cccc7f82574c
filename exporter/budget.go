package exporter

import (
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// cpuBudget bounds the CPU the collection spends, as a token bucket of CPU time: it fills
// at share CPU-seconds per wall second up to capacity, and everything the process spends
// drains it. The collection starts a walk only while the bucket holds credit; a walk may
// overdraw it, and the debt is paid back by later cycles, so over time the process stays
// within share of one core whenever the walks are what it spends its time on.
//
// It charges the process's CPU (getrusage RUSAGE_SELF), not the walks' own: a walk reads
// folders on several goroutines and OS threads (and the garbage it leaves is collected on
// others), so per-thread accounting would miss most of it, and what the operator budgets is
// the exporter's share of the node, the figure process_cpu_seconds_total and the container's
// cgroup show. Scrapes and live measurements are charged too: they are not deferred, but
// they leave less for the walks.
//
// It also attributes the CPU spent to the walks in flight, shared equally among them between
// two events (a walk starting or ending), which tells what each volume's walk costs.
type cpuBudget struct {
	share    float64
	capacity time.Duration
	cpu      func() time.Duration
	now      func() time.Time

	mu       sync.Mutex
	credit   time.Duration
	lastWall time.Time
	lastCPU  time.Duration
	inFlight map[*walkCost]struct{}
}

// walkCost accumulates the CPU attributed to one walk.
type walkCost struct{ cpu time.Duration }

// newCPUBudget returns a full bucket of capacity for share of one core.
func newCPUBudget(share float64, capacity time.Duration, cpu func() time.Duration, now func() time.Time) *cpuBudget {
	return &cpuBudget{share: share, capacity: capacity, cpu: cpu, now: now,
		credit: capacity, lastWall: now(), lastCPU: cpu(), inFlight: map[*walkCost]struct{}{}}
}

// update fills the bucket for the time passed, drains what the process spent, and
// attributes that to the walks in flight. Callers hold b.mu.
func (b *cpuBudget) update() {
	wall, cpu := b.now(), b.cpu()
	spent := max(0, cpu-b.lastCPU)
	b.credit += time.Duration(b.share*float64(max(0, wall.Sub(b.lastWall)))) - spent
	b.credit = min(b.credit, b.capacity)
	if n := len(b.inFlight); n > 0 {
		for w := range b.inFlight {
			w.cpu += spent / time.Duration(n)
		}
	}
	b.lastWall, b.lastCPU = wall, cpu
}

// remaining is the credit now: CPU time the collection may still start walks on, negative
// while a walk's overdraft is being paid back.
func (b *cpuBudget) remaining() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.update()
	return b.credit
}

// start begins a walk expected to cost cost (0: unknown) if the bucket allows it, and
// returns the walk's cost accumulator, to hand to end. The bucket allows a walk while it
// holds more than min(cost, capacity): a walk whose cost is known never takes more than
// the bucket holds, so it cannot overdraw it into the next cycles (whose walks of limited
// volumes would then be deferred), and one costlier than a full bucket still runs when
// the bucket is full.
func (b *cpuBudget) start(cost time.Duration) (*walkCost, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.update()
	if b.credit <= 0 || b.credit < min(cost, b.capacity) {
		return nil, false
	}
	w := &walkCost{}
	b.inFlight[w] = struct{}{}
	return w, true
}

// end ends the walk of w and returns the CPU attributed to it.
func (b *cpuBudget) end(w *walkCost) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.update()
	delete(b.inFlight, w)
	return w.cpu
}

// processCPU is the CPU time, user and system, the process has spent.
func processCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0 // cannot happen with RUSAGE_SELF; reading 0 then drains nothing
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
