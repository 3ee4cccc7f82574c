package fswalk

import (
	"fmt"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// threadMeter meters one walking goroutine: it locks the goroutine to its OS thread, so that
// the thread's CPU clock counts this goroutine's work (its system calls included) and no
// other's, and charges what the clock advanced to the meter, every threadMeterEvery ticks
// and when stopped, so that a budget sees a long walk as it goes.
type threadMeter struct {
	m     Meter
	last  time.Duration
	ticks int
}

// threadMeterEvery is how many directories or batches a walking goroutine reads between two
// readings of its thread's CPU clock: a reading is a system call (the vDSO does not serve
// thread clocks), small next to a directory's 4 or more, and rarer still this way.
const threadMeterEvery = 32

// startThreadMeter starts metering the calling goroutine for m; nil m meters nothing.
func startThreadMeter(m Meter) threadMeter {
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
	t.m.Add(now - t.last)
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

// ProcessCPU is the CPU time, user and system, the whole process has spent.
func ProcessCPU() (time.Duration, error) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
