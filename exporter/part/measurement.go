package part

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"
)

// Measurement is the state of one volume at one moment.
type Measurement struct {
	UsedBytes         int64
	CapacityBytes     int64
	AvailableBytes    int64
	InodesUsed        int64
	UnreadableEntries int64
	// MeasuredAt is when the numbers were true: the start of a walk, or the time the
	// kubelet stamped on its (cached) volume stats.
	MeasuredAt time.Time
	// CompletedAt is when the measurement ended: the end of a walk, or MeasuredAt for
	// the kubelet's stats. Freshness is judged by it, so that a long honest walk of a
	// big volume is not taken for stale.
	CompletedAt time.Time
	// UncheckedLinks counts hard links counted without checking whether their inode
	// was counted already (fswalk.DiskUsage.UncheckedLinks); above 0, UsedBytes may be over.
	UncheckedLinks int64
	// ChangedDirectories counts directories the walk did not see as they were when it started
	// (fswalk.DiskUsage.Changed): above 0, data may have moved past it.
	ChangedDirectories int64
	// CutShort says the walk hit its deadline before reading every directory: UsedBytes is
	// what it counted until then.
	CutShort bool
	// QuotaExcessBytes is by how many bytes the volume's project quota exceeded UsedBytes, a
	// walk that checked it: files elsewhere with the volume's project ID (another tenant's), or
	// the volume's own deleted files still held open. 0 when the quota was not checked.
	QuotaExcessBytes int64
	// Method says how the numbers were obtained: the exporter's MethodWalk, MethodProjectQuota,
	// MethodStatfs, MethodFiles, MethodKubelet or MethodNone.
	Method string
	// Unlocated is set for a writable layer that could not be located, to the reason (a
	// LayerError's): UsedBytes is 0 or the kubelet's figure (Method MethodKubelet), a lower bound;
	// or for one walked without its container's image VOLUME directories (an image volume reason):
	// UsedBytes is the layer's own, a lower bound too.
	Unlocated string
	// UnexplainedBytes is the part of the usage of the volume's own filesystem (a memory
	// volume's tmpfs) that no name in it leads to: files deleted but held open. 0 where it is
	// not known: a volume on a shared filesystem, or a walk that was itself a lower bound.
	UnexplainedBytes int64
	// UnlinkedOpenBytes is the part of UsedBytes that the pod's processes hold open in files
	// deleted from the volume (OpenFiles OpenFilesCounted), which no walk sees.
	UnlinkedOpenBytes int64
	// OpenFiles says whether UsedBytes counts such files, for a volume walked on a shared
	// filesystem: OpenFilesCounted, OpenFilesOff or OpenFilesUnreadable (a lower bound for
	// them); "" where the measurement counts them anyway (a tmpfs of its own, a project quota)
	// or the part is no emptyDir.
	OpenFiles string
}

// Whether a walked emptyDir's usage counts the files its pod deleted but holds open, as the
// outcome label of emptydir_exporter_open_files_volumes spells it.
const (
	OpenFilesCounted    = "counted"
	OpenFilesOff        = "off"
	OpenFilesUnreadable = "unreadable"
)

// How a volume's usage was measured, as the method label spells it.
const (
	// MethodWalk: the exporter walked the volume (du semantics).
	MethodWalk = "walk"
	// MethodProjectQuota: read in O(1) from the XFS/ext4 project quota the kubelet put the
	// volume under (LocalStorageCapacityIsolationFSQuotaMonitoring).
	MethodProjectQuota = "project_quota"
	// MethodKubelet: the kubelet's Summary API (its own walk or quota, cached).
	MethodKubelet = "kubelet"
	// MethodStatfs: a medium Memory volume on a tmpfs of its own (the kubelet's layout): its
	// bytes from the filesystem's statistics plus the user.* extended attributes a walk of it
	// finds, which statfs does not count; its inodes the walk's (fswalk.OwnTmpfsUsage).
	MethodStatfs = "statfs"
	// MethodFiles: the files of a directory the kubelet or the runtime writes (logs,
	// etc-hosts), each one's allocated blocks, as the kubelet adds them up.
	MethodFiles = "files"
	// MethodNone: a writable layer that could not be located (Measurement.Unlocated).
	MethodNone = "none"
)

// LowerBound reports whether UsedBytes is only a lower bound: entries unreadable, directories
// changed during the walk, the walk cut short, or a writable layer not located.
func (m Measurement) LowerBound() bool {
	return m.UnreadableEntries > 0 || m.ChangedDirectories > 0 || m.CutShort || m.Unlocated != ""
}

// Why a measurement is a lower bound, as the reason label of the incomplete series spells it.
const (
	IncompleteUnreadable = "unreadable"
	IncompleteChanged    = "changed_during_walk"
	IncompleteCutShort   = "cut_short"
	IncompleteUnlocated  = "unlocated"
	// IncompleteUnmeasured: a part of a pod has no measurement yet (pod series only).
	IncompleteUnmeasured = "unmeasured"
)

// IncompleteReasons says why UsedBytes is a lower bound, sorted; none when it is not one.
func (m Measurement) IncompleteReasons() []string {
	var why []string
	if m.ChangedDirectories > 0 {
		why = append(why, IncompleteChanged)
	}
	if m.CutShort {
		why = append(why, IncompleteCutShort)
	}
	if m.Unlocated != "" {
		why = append(why, IncompleteUnlocated)
	}
	if m.UnreadableEntries > 0 {
		why = append(why, IncompleteUnreadable)
	}
	return why
}

// Result is the outcome of measuring one volume of one pod.
type Result struct {
	Namespace, Pod, UID string
	Part                Part
	Measurement         Measurement
	// Err is set when the volume could not be measured; it is a *MeasureError.
	Err error
	// IncompleteSince is when the first of the volume's consecutive lower-bound measurements
	// started (IncompleteSince); zero while Measurement is complete.
	IncompleteSince time.Time
	// UnchangedAt is when a cycle last found the pod's change mark unchanged since Measurement
	// began (Config.ChangeSignal): its values still stood then. Zero: none since.
	UnchangedAt time.Time
}

// IncompleteSince is the IncompleteSince of m, a new measurement of a volume whose previous one
// gave prev: kept while m is a lower bound too, m's start when m begins a run of them.
func IncompleteSince(prev time.Time, m Measurement) time.Time {
	switch {
	case !m.LowerBound():
		return time.Time{}
	case !prev.IsZero():
		return prev
	default:
		return m.MeasuredAt
	}
}

// Meter is charged the CPU time a measurement's walk spends, as it goes: the collection's and a
// live request's budgets drain it (fswalk.CPUMeter is one).
type Meter interface {
	Add(cpu time.Duration)
	// Spent is what the walk was charged so far.
	Spent() time.Duration
}

// Source measures emptyDir volumes. Implementations report per volume, so that one
// unreadable volume never hides the others.
type Source interface {
	// Name is the value of the source label: "filesystem" or "kubelet".
	Name() string
	// Measure measures every volume of the given pods now.
	Measure(ctx context.Context, pods []Pod) []Result
}

// Measurer is a Source that measures one volume at a time, by walking it. The
// collection gives each volume its own walk, bounded in time, so that a slow or
// hostile volume cannot starve the others.
type Measurer interface {
	Source
	// MeasurePart measures one volume of a pod now, charging the CPU time its walk's
	// threads spend to meter when it is not nil (the collection's CPU budget).
	MeasurePart(ctx context.Context, pod Pod, v Part, meter Meter) (Measurement, error)
}

// LiveMeasurer is a Measurer whose periodic measurement of a volume may count more
// than the volume holds, and which measures a live request without: the live answer is what
// the remediator evicts on. source.Filesystem is one (a project quota's upper bound).
type LiveMeasurer interface {
	Measurer
	// MeasurePartLive is MeasurePart for a live request.
	MeasurePartLive(ctx context.Context, pod Pod, v Part, meter Meter) (Measurement, error)
}

// MeasureEach measures the volumes of pods one after another with measure, unmetered:
// Source.Measure of a Measurer.
func MeasureEach(ctx context.Context, pods []Pod, measure func(context.Context, Pod, Part, Meter) (Measurement, error)) []Result {
	var out []Result
	for _, p := range pods {
		for _, v := range p.Parts {
			r := Result{Namespace: p.Namespace, Pod: p.Pod, UID: p.UID, Part: v}
			r.Measurement, r.Err = measure(ctx, p, v, nil)
			out = append(out, r)
		}
	}
	return out
}

// ErrAbsent marks a volume whose directory (or stats) is not there while its pod is
// Settling: not set up yet, or torn down already. Such a volume has no series and is no
// failure: on a node where pods come and go it is the normal state of some of them.
var ErrAbsent = errors.New("volume not set up yet or already torn down")

// AbsentWhileSettling turns a not_found error of a Settling pod's volume into
// ErrVolumeAbsent and returns any other err as it is.
func AbsentWhileSettling(p Pod, err error) error {
	if err != nil && p.Settling && ReasonOf(err) == ReasonNotFound {
		return ErrAbsent
	}
	return err
}

// Reasons a volume could not be measured, as the reason label spells them.
const (
	ReasonNotFound           = "not_found"
	ReasonPermission         = "permission"
	ReasonIO                 = "io"
	ReasonTimeout            = "timeout"
	ReasonKubeletUnreachable = "kubelet_unreachable"
	ReasonKubeletError       = "kubelet_error"
)

// MeasureError says why a volume could not be measured.
type MeasureError struct {
	Reason string
	Err    error
}

func (e *MeasureError) Error() string { return fmt.Sprintf("%s: %v", e.Reason, e.Err) }
func (e *MeasureError) Unwrap() error { return e.Err }

// ReasonOf gives the reason label of a measurement error.
func ReasonOf(err error) string {
	var me *MeasureError
	if errors.As(err, &me) {
		return me.Reason
	}
	return ReasonIO
}

// FSError classifies a filesystem error.
func FSError(err error) *MeasureError {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return &MeasureError{Reason: ReasonTimeout, Err: err}
	case errors.Is(err, fs.ErrNotExist):
		return &MeasureError{Reason: ReasonNotFound, Err: err}
	case errors.Is(err, fs.ErrPermission):
		return &MeasureError{Reason: ReasonPermission, Err: err}
	default:
		return &MeasureError{Reason: ReasonIO, Err: err}
	}
}
