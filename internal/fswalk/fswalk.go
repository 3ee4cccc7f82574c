package fswalk

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// DiskUsage is what a walk of one directory found, with du semantics.
type DiskUsage struct {
	// UsedBytes counts allocated blocks (st_blocks*512), so sparse files count what
	// they really occupy, as `du -s -B1` does.
	UsedBytes int64
	// XattrBytes is the part of UsedBytes that is the user.* extended attributes' names and
	// values, counted on a tmpfs only (kernel memory outside any block, which statfs does not
	// see either: OwnTmpfsUsage).
	XattrBytes int64
	// NamedBytes, set by OwnTmpfsUsage only (where UsedBytes is the filesystem's), is what the
	// walk found through the tmpfs's names, XattrBytes included: UsedBytes beyond it is held by
	// files no name leads to.
	NamedBytes int64
	// Inodes counts files, directories and links, each hard-linked inode once.
	Inodes int64
	// Unreadable counts entries the walk could not read; above zero, UsedBytes is a
	// lower bound.
	Unreadable int64
	// UncheckedLinks counts hard links counted without checking whether their inode
	// was counted already, because the walk remembered as many hard-linked inodes as it
	// may; above zero, UsedBytes and Inodes may be over (never under).
	UncheckedLinks int64
	// Changed counts directories the walk did not see as they were when it started: a listed
	// directory gone or something else in its place when the walk came to enter it, or a directory
	// changed (ctime) between the walk's start and the end of its listing. What left such a
	// directory may have moved where the walk had already read, so above zero UsedBytes is a
	// lower bound.
	Changed int64
	// CutShort says that the walk's context ended before it had read every directory:
	// UsedBytes is what it counted until then, a lower bound.
	CutShort bool
}

// LowerBound reports whether UsedBytes is only a lower bound of what the directory holds:
// entries unreadable, directories changed during the walk, or the walk cut short.
func (d DiskUsage) LowerBound() bool { return d.Unreadable > 0 || d.Changed > 0 || d.CutShort }

// ErrNoOwnProjectQuota says that a directory is not under a project quota of its own, so only a
// walk can measure it.
var ErrNoOwnProjectQuota = errors.New("not under a project quota of its own")

// Options tune one walk.
type Options struct {
	// Concurrency bounds the directories (or batches of a large directory's entries) read at
	// once; below 1 means 1.
	Concurrency int
	// Meter, when not nil, is charged the CPU time of the walk's threads as it goes.
	Meter Meter
	// Retries bounds how many times a walk that saw directories change (DiskUsage.Changed) is
	// done again, to find a result without; the last one stays a lower bound.
	Retries int
}

// Space is the size of the filesystem holding a directory.
type Space struct {
	CapacityBytes, AvailableBytes int64
}

// Meter is charged the CPU time of a walk's threads as they go; CPUMeter is one.
type Meter interface{ Add(cpu time.Duration) }

// CPUMeter adds up the CPU time one walk spent, as the threads that walked counted it, and
// adds it to totals of several walks (what a CPU budget drains, what a namespace's walks
// spent) as it goes.
type CPUMeter struct {
	walk   atomic.Int64
	totals []*atomic.Int64
	// over and cut are set by CutWhen.
	over    func() bool
	cut     func()
	cutOnce sync.Once
}

// NewCPUMeter returns a meter for one walk that also adds to each of totals (nil ones left
// out).
func NewCPUMeter(totals ...*atomic.Int64) *CPUMeter {
	m := &CPUMeter{}
	for _, t := range totals {
		if t != nil {
			m.totals = append(m.totals, t)
		}
	}
	return m
}

// CutWhen makes the meter ask over after each charge and call cut, once, the first time it
// says yes (a live walk that has exhausted its caller's CPU budget: cut cancels its context),
// and returns m; call it before the walk starts. The walk then ends at its threads' next look
// at its context: it overshoots by what they spend until then, at most the threadMeterEvery
// directories (or batches) each reads between two charges.
func (m *CPUMeter) CutWhen(over func() bool, cut func()) *CPUMeter {
	m.over, m.cut = over, cut
	return m
}

// Add charges d of CPU time to the walk.
func (m *CPUMeter) Add(d time.Duration) {
	m.walk.Add(int64(d))
	for _, t := range m.totals {
		t.Add(int64(d))
	}
	if m.over != nil && m.over() {
		m.cutOnce.Do(m.cut)
	}
}

// Spent is the CPU time charged to the walk so far.
func (m *CPUMeter) Spent() time.Duration { return time.Duration(m.walk.Load()) }
