package exporter

import (
	"maps"
	"slices"
	"time"

	"github.com/emptydir-guard/emptydir-guard/exporter/part"
)

// StorageUsage is a pod's ephemeral-storage usage as the kubelet's two ephemeral-storage
// checks see it, added up from the measurements of its parts.
type StorageUsage struct {
	// UsedBytes is what podEphemeralStorageLimitEviction compares with LimitBytes: every
	// running container's writable layer and logs, the disk-medium emptyDir, configMap and
	// gitRepo volumes, etc-hosts and the pod's own log files (calcEphemeralStorage).
	UsedBytes  int64
	LimitBytes *int64
	// Parts splits UsedBytes by part label (PartEmptyDir, PartWritableLayer, PartLogs,
	// PartOther); every part is there, 0 when the pod has none of it.
	Parts map[string]int64
	// LowerBound says a part's measurement is missing (not measured yet, or failed without an
	// earlier one) or a lower bound, so UsedBytes is one too.
	LowerBound bool
	// IncompleteReasons says why UsedBytes is a lower bound (the Incomplete* reasons), sorted.
	IncompleteReasons []string
	// IncompleteSince is the earliest VolumeResult.IncompleteSince of its parts; zero with none.
	IncompleteSince time.Time
	// MeasuredAt is when the oldest measurement behind UsedBytes started; zero with none.
	MeasuredAt time.Time
	Containers []ContainerUsage
}

// ContainerUsage is what containerEphemeralStorageLimitEviction compares for one container.
type ContainerUsage struct {
	Name string
	// UsedBytes is its logs, plus its writable layer unless the node has a dedicated image
	// filesystem.
	UsedBytes  int64
	LimitBytes *int64
	// WritableLayerBytes and LogsBytes are the two parts, the first whether it counts or not.
	WritableLayerBytes, LogsBytes int64
	// Unlocated is why its writable layer could not be located; "" when it was.
	Unlocated  string
	LowerBound bool
	// IncompleteSince is the earliest VolumeResult.IncompleteSince of the parts it counts.
	IncompleteSince time.Time
	MeasuredAt      time.Time
}

// storageUsage adds up the measurements of pod p's parts in results (keyed by part name; an
// absent one is missing) as the kubelet does; dedicatedImageFS leaves writable layers out of
// the containers' own usage. With ownOnly, the kubelet's figure standing in for a writable layer
// the walk could not locate counts as 0: a live answer, which decides evictions, holds to what
// the source measured itself (source kubelet measures everything from the Summary: its answers
// are as old as the kubelet's stats, which the remediator judges).
func storageUsage(p part.Pod, results map[string]part.Result, dedicatedImageFS, ownOnly bool) StorageUsage {
	u := StorageUsage{LimitBytes: p.Storage.LimitBytes,
		Parts: map[string]int64{part.LabelEmptyDir: 0, part.LabelWritableLayer: 0, part.LabelLogs: 0, part.LabelOther: 0}}
	containers := map[string]*ContainerUsage{}
	for _, c := range p.Storage.Containers {
		u.Containers = append(u.Containers, ContainerUsage{Name: c.Name, LimitBytes: c.LimitBytes})
	}
	for i := range u.Containers {
		containers[u.Containers[i].Name] = &u.Containers[i]
	}
	older := func(t *time.Time, m time.Time) {
		if t.IsZero() || m.Before(*t) {
			*t = m
		}
	}
	reasons := map[string]bool{}
	for _, v := range p.Parts {
		if v.Kind == part.KindEmptyDir && v.Medium != part.MediumDisk {
			continue // memory and hugepages are no local ephemeral storage (IsLocalEphemeralVolume)
		}
		r, ok := results[v.Name]
		c := containers[v.Container]
		if v.Kind != part.KindWritableLayer && v.Kind != part.KindContainerLogs {
			c = nil
		}
		if !ok || r.Err != nil {
			u.LowerBound, reasons[part.IncompleteUnmeasured] = true, true
			if c != nil && (v.Kind != part.KindWritableLayer || !dedicatedImageFS) {
				c.LowerBound = true
			}
			continue
		}
		m := r.Measurement
		if ownOnly && m.Unlocated != "" && m.Method == part.MethodKubelet {
			m.UsedBytes = 0 // the kubelet's figure for a layer the walk could not locate
		}
		u.UsedBytes += m.UsedBytes
		u.Parts[v.Kind.Label()] += m.UsedBytes
		u.LowerBound = u.LowerBound || m.LowerBound()
		for _, why := range m.IncompleteReasons() {
			reasons[why] = true
		}
		if !r.IncompleteSince.IsZero() {
			older(&u.IncompleteSince, r.IncompleteSince)
		}
		older(&u.MeasuredAt, m.MeasuredAt)
		if c == nil {
			continue
		}
		switch v.Kind {
		case part.KindWritableLayer:
			c.WritableLayerBytes, c.Unlocated = m.UsedBytes, m.Unlocated
			if dedicatedImageFS {
				continue
			}
		case part.KindContainerLogs:
			c.LogsBytes = m.UsedBytes
		}
		c.UsedBytes += m.UsedBytes
		c.LowerBound = c.LowerBound || m.LowerBound()
		if !r.IncompleteSince.IsZero() {
			older(&c.IncompleteSince, r.IncompleteSince)
		}
		older(&c.MeasuredAt, m.MeasuredAt)
	}
	u.IncompleteReasons = slices.Sorted(maps.Keys(reasons))
	return u
}
