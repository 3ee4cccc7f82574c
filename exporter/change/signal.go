package change

import (
	"github.com/emptydir-guard/emptydir-guard/exporter/part"
	"github.com/emptydir-guard/emptydir-guard/internal/podcgroup"
)

// Signal tells, without walking, whether a pod's own processes may have grown its files
// since a moment: a mark of what its cgroup's counters say it has written (internal/podcgroup).
// A guarded part whose pod's mark is still the one read before its last complete walk began is
// walked behind the others (or not at all) before Config.UnlimitedInterval has passed since that
// walk: the kernel says nothing of the pod's can have grown by a write of the pod's. What the
// marks cannot see (space allocated without a write, writes by processes outside the pod's
// cgroup) is bounded by that interval and a cycle, as every guarded part is walked at least that
// often whatever the marks say, while its namespace's walks stay within its part of the CPU
// budget (schedule.Due; beyond, its own walks wait for its part). A pod whose runtime writes
// from outside its cgroup (a sandbox) gets no mark (Config.ChangeSignalRuntimeClasses)
// (docs/change-signal.md).
type Signal interface {
	// Mark reads pod p's mark now: one that differs from an earlier one of the same pod
	// whenever the pod's processes may have written in between. An error: no mark vouches for
	// the pod (its cgroup not found or unreadable, or no sound counter here), which is then
	// walked as without a signal; errors.As to a *Error gives the reason.
	Mark(p part.Pod) (Mark, error)
	// Vouches reports whether equal marks may spare the walk of part v: whether the counters
	// behind them see every write that takes new space where v lives.
	Vouches(v part.Part) bool
}

// Error is why a pod has no mark.
type Error struct {
	// Reason is the value of the reason label of emptydir_exporter_change_marks_total.
	Reason string
	Err    error
}

func (e *Error) Error() string { return e.Reason + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Outcomes of reading a pod's mark (reason label of emptydir_exporter_change_marks_total):
// MarkRead, or a Error's Reason.
const (
	MarkRead = "read"
	// MarkUnknown: an error that is no *Error.
	MarkUnknown = "error"
	// MarkRuntimeClass: the pod runs under a RuntimeClass whose writes its cgroup is not known
	// to carry (a sandbox such as Kata writes the pod's files from processes of its VM's, outside
	// the pod's cgroup), so its mark is not read: equal marks would vouch every part unchanged.
	MarkRuntimeClass = "runtime_class"
)

// Mark is a pod's change mark: the write counters of its cgroup at one moment. It is a
// comparable value: two marks of one pod are equal when its processes cannot have written in
// between.
type Mark struct {
	counters podcgroup.Snapshot
}

// MarkOf is the mark of counters read from a pod's cgroup.
func MarkOf(counters podcgroup.Snapshot) Mark { return Mark{counters: counters} }

// Counters are the cgroup's counters m was read from.
func (m Mark) Counters() podcgroup.Snapshot { return m.counters }
