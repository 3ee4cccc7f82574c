package change

import (
	"errors"
	"fmt"

	"github.com/emptydir-guard/emptydir-guard/exporter/part"
	"github.com/emptydir-guard/emptydir-guard/internal/podcgroup"
)

// MarkUnavailable is the reason of every pod's missing mark on a node whose cgroups
// cannot be read at all (Unavailable).
const MarkUnavailable = "unavailable"

// Cgroup is the Signal of the pods' cgroups: a pod's mark is the podcgroup.Snapshot
// of its cgroup, found from its UID and QoS class where the kubelet made it.
type Cgroup struct {
	locator *podcgroup.Locator
	// vouches tells, by Kind and medium, whether equal snapshots may spare a walk: decided at
	// start from the cgroup version and the filesystems the parts live on.
	emptyDirDisk, emptyDirMemory, layers bool
}

// Dirs are the directories whose filesystems decide which parts a mark vouches for.
type Dirs struct {
	// Pods is the kubelet's pods directory (<root-dir>/pods), holding the emptyDirs.
	Pods string
	// Layers is the runtime's snapshotter root, holding the writable layers; "" when none is
	// measured.
	Layers string
	// ImageVolumes is containerd's CRI containers directory, holding image VOLUMEs; "" when
	// unknown.
	ImageVolumes string
}

// NewCgroup opens the node's cgroups as cfg says and judges, from the filesystems of
// dirs, which parts the snapshots
// can vouch for: a disk emptyDir on a tmpfs root dir is in memory (so not under cgroup v2),
// and under cgroup v2 a disk part only where that filesystem charges writeback to the
// writer's cgroup (ext4, XFS, Btrfs, F2FS): elsewhere io.stat does not see it and a pod
// under a memory limit could write while its page cache stays level.
func NewCgroup(cfg podcgroup.Config, dirs Dirs) (*Cgroup, error) {
	loc, err := podcgroup.Open(cfg)
	if err != nil {
		return nil, fmt.Errorf("cgroups at %s: %w", cfg.Mount, err)
	}
	s := &Cgroup{locator: loc}
	snap := podcgroup.Snapshot{Version: loc.Version()}
	s.emptyDirMemory = snap.Vouches(podcgroup.Memory)
	if s.emptyDirDisk, err = vouchesFor(snap, dirs.Pods); err != nil {
		return nil, err
	}
	if dirs.Layers != "" {
		if s.layers, err = vouchesFor(snap, dirs.Layers); err != nil {
			// No layer to measure is no reason to refuse the signal: layers are then walked
			// at their cadence.
			s.layers = false
		}
	}
	if s.layers && dirs.ImageVolumes != "" {
		// A layer's image VOLUME directories are walked with it (LayerLocator.ImageVolumes); where
		// their directory cannot be read, none is walked.
		if v, err := vouchesFor(snap, dirs.ImageVolumes); err == nil {
			s.layers = v
		}
	}
	return s, nil
}

// vouchesFor reports whether equal snapshots vouch for files in dir, by dir's filesystem.
func vouchesFor(snap podcgroup.Snapshot, dir string) (bool, error) {
	m, err := podcgroup.MediumOf(dir)
	if err != nil {
		return false, err
	}
	if !snap.Vouches(m) {
		return false, nil
	}
	if snap.Version == podcgroup.V2 && m == podcgroup.Disk {
		return podcgroup.WritebackCharged(dir)
	}
	return true, nil
}

// Retarget looks for the pods' cgroups below another cgroup root from now on
// (podcgroup.Locator.Retarget).
func (s *Cgroup) Retarget(root string) error { return s.locator.Retarget(root) }

// Version is the cgroup version the signal reads.
func (s *Cgroup) Version() podcgroup.Version { return s.locator.Version() }

// Mark reads the pod's snapshot; an error is a *Error with podcgroup's reason.
func (s *Cgroup) Mark(p part.Pod) (Mark, error) {
	snap, err := s.locator.Mark(p.KubeletUID(), p.QOSClass)
	if err != nil {
		reason := MarkUnknown
		if pe := (*podcgroup.Error)(nil); errors.As(err, &pe) {
			reason = pe.Reason
		}
		return Mark{}, &Error{Reason: reason, Err: err}
	}
	return MarkOf(snap), nil
}

// Vouches reports whether equal snapshots spare a walk of v: emptyDirs and writable layers
// by their medium; configMap and gitRepo volumes are written by the kubelet, outside the
// pod's cgroup, so never.
func (s *Cgroup) Vouches(v part.Part) bool {
	switch v.Kind {
	case part.KindEmptyDir:
		if v.Medium == part.MediumMemory {
			return s.emptyDirMemory
		}
		return s.emptyDirDisk
	case part.KindWritableLayer:
		return s.layers
	default:
		return false
	}
}

// Describe names what the signal vouches for, for the start-up log.
func (s *Cgroup) Describe() []any {
	return []any{"cgroup_version", int(s.locator.Version()), "vouches_disk_emptydirs", s.emptyDirDisk,
		"vouches_memory_emptydirs", s.emptyDirMemory, "vouches_writable_layers", s.layers}
}

// Unavailable stands for the change signal on a node whose cgroups cannot be read: no
// pod gets a mark, each read counted with reason unavailable (and the first logged), so the
// node keeps today's schedule and says why.
type Unavailable struct{ Err error }

// Mark fails for every pod.
func (u Unavailable) Mark(part.Pod) (Mark, error) {
	return Mark{}, &Error{Reason: MarkUnavailable, Err: u.Err}
}

// Vouches for nothing.
func (Unavailable) Vouches(part.Part) bool { return false }
