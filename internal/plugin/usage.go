package plugin

import (
	"cmp"
	"slices"
	"time"
)

// The kinds of thing a Usage measures, each against its own limit.
const (
	KindEmptyDir  = "emptyDir"
	KindPod       = "pod"
	KindContainer = "container"
)

// Usage is one pod volume, pod or container against its limit: a row of `top`.
type Usage struct {
	// Kind is KindEmptyDir (the volume's sizeLimit), KindPod (the pod's ephemeral-storage
	// limit, its containers' added up) or KindContainer (the container's own).
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	UID       string `json:"uid"`
	// Name is the volume's or the container's name; empty for a pod.
	Name string `json:"name,omitempty"`
	// Medium is an emptyDir's: disk, memory or hugepages.
	Medium    string `json:"medium,omitempty"`
	Node      string `json:"node"`
	UsedBytes int64  `json:"usedBytes"`
	// LimitBytes is left out when there is no limit.
	LimitBytes *int64 `json:"limitBytes,omitempty"`
	// Percent is UsedBytes of LimitBytes, in percent; left out without a limit.
	Percent *float64 `json:"percent,omitempty"`
	// MeasurementAgeSeconds is how old the measurement is: from the start of the walk behind it
	// until now. Left out when the source does not say.
	MeasurementAgeSeconds *float64 `json:"measurementAgeSeconds,omitempty"`
	// MeasurementAgeIsBound says MeasurementAgeSeconds is the age of the node's oldest
	// measurement behind a limit, an upper bound, because the exporter does not publish each
	// one's (the opt-in family emptydir_measurement_age_seconds).
	MeasurementAgeIsBound bool `json:"measurementAgeIsBound,omitempty"`
	// LowerBound says UsedBytes is a lower bound (an incomplete measurement).
	LowerBound bool `json:"lowerBound,omitempty"`
}

// Target names what the row measures, as `top` prints it: pod, emptyDir/<volume>,
// container/<name>.
func (u Usage) Target() string {
	if u.Kind == KindPod {
		return KindPod
	}
	return u.Kind + "/" + u.Name
}

// The keys of top's --sort-by, each a column, largest first as kubectl top sorts.
const (
	// SortPercent: USE%, the nearest to the limit first; the rows without a limit after them,
	// by USED.
	SortPercent = "percent"
	// SortUsed: USED.
	SortUsed = "used"
	// SortLimit: LIMIT; the rows without a limit last.
	SortLimit = "limit"
)

// SortKeys are --sort-by's values.
var SortKeys = []string{SortPercent, SortUsed, SortLimit}

// SortNearestLimit orders rows as `top` prints them by default (SortPercent).
func SortNearestLimit(us []Usage) { SortUsages(us, SortPercent) }

// SortUsages orders rows by the key by (one of SortKeys; SortPercent for another), largest
// first; ties by namespace, pod and target, so that the order is stable from run to run.
func SortUsages(us []Usage, by string) {
	slices.SortStableFunc(us, func(a, b Usage) int {
		var c int
		switch by {
		case SortUsed:
			c = cmp.Compare(b.UsedBytes, a.UsedBytes)
		case SortLimit:
			c = compareDesc(a.LimitBytes, b.LimitBytes)
		default:
			c = cmp.Or(compareDesc(a.Percent, b.Percent), cmp.Compare(b.UsedBytes, a.UsedBytes))
		}
		return cmp.Or(c, cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Pod, b.Pod),
			cmp.Compare(kindOrder(a.Kind), kindOrder(b.Kind)), cmp.Compare(a.Name, b.Name))
	})
}

// compareDesc orders the larger first, and nil (no limit) after every value.
func compareDesc[T cmp.Ordered](a, b *T) int {
	switch {
	case a != nil && b == nil:
		return -1
	case a == nil && b != nil:
		return 1
	case a == nil:
		return 0
	}
	return cmp.Compare(*b, *a)
}

func kindOrder(k string) int {
	switch k {
	case KindPod:
		return 0
	case KindContainer:
		return 1
	}
	return 2
}

// sample is one series' value, from an exporter's exposition or from Prometheus.
type sample struct {
	name   string
	labels map[string]string
	value  float64
	// staleness is how long before now the value was taken (Prometheus: the sample's age);
	// 0 for an exporter's exposition, read now.
	staleness time.Duration
}

// The series top reads (docs/metrics.md).
const (
	mVolumeUsed           = "emptydir_used_bytes"
	mVolumeLimit          = "emptydir_limit_bytes"
	mVolumeAge            = "emptydir_measurement_age_seconds"
	mVolumeIncomplete     = "emptydir_measurement_incomplete"
	mPodUsed              = "emptydir_pod_ephemeral_storage_used_bytes"
	mPodLimit             = "emptydir_pod_ephemeral_storage_limit_bytes"
	mPodAge               = "emptydir_pod_ephemeral_storage_measurement_age_seconds"
	mPodIncomplete        = "emptydir_pod_ephemeral_storage_measurement_incomplete"
	mContainerUsed        = "emptydir_container_ephemeral_storage_used_bytes"
	mContainerLimit       = "emptydir_container_ephemeral_storage_limit_bytes"
	mContainerUnlocated   = "emptydir_container_writable_layer_unlocated"
	mNodeOldestTriggerAge = "emptydir_exporter_oldest_trigger_measurement_age_seconds"
)

// topFamilies are the families above, for a Prometheus query.
var topFamilies = []string{mVolumeUsed, mVolumeLimit, mVolumeAge, mVolumeIncomplete, mPodUsed, mPodLimit,
	mPodAge, mPodIncomplete, mContainerUsed, mContainerLimit, mContainerUnlocated, mNodeOldestTriggerAge}

type usageKey struct{ kind, uid, name string }

// buildUsages joins the samples of one or more exporters into rows: one per emptyDir volume,
// pod with an ephemeral-storage limit and container with a usage series.
func buildUsages(samples []sample) []Usage {
	rows := map[usageKey]*Usage{}
	ages := map[usageKey]float64{}
	lower := map[usageKey]bool{}
	nodeAge := map[string]float64{}
	row := func(kind, name string, l map[string]string) *Usage {
		k := usageKey{kind, l["uid"], name}
		u := rows[k]
		if u == nil {
			u = &Usage{Kind: kind, Namespace: l["namespace"], Pod: l["pod"], UID: l["uid"], Name: name, Node: l["node"]}
			rows[k] = u
		}
		return u
	}
	for _, s := range samples {
		l := s.labels
		st := s.staleness.Seconds()
		switch s.name {
		case mVolumeUsed:
			u := row(KindEmptyDir, l["volume"], l)
			u.UsedBytes, u.Medium = int64(s.value), l["medium"]
		case mVolumeLimit:
			row(KindEmptyDir, l["volume"], l).LimitBytes = ptr(int64(s.value))
		case mVolumeAge:
			ages[usageKey{KindEmptyDir, l["uid"], l["volume"]}] = s.value + st
		case mVolumeIncomplete:
			lower[usageKey{KindEmptyDir, l["uid"], l["volume"]}] = s.value > 0
		case mPodUsed:
			row(KindPod, "", l).UsedBytes = int64(s.value)
		case mPodLimit:
			row(KindPod, "", l).LimitBytes = ptr(int64(s.value))
		case mPodAge:
			ages[usageKey{KindPod, l["uid"], ""}] = s.value + st
		case mPodIncomplete:
			lower[usageKey{KindPod, l["uid"], ""}] = s.value > 0
		case mContainerUsed:
			row(KindContainer, l["container"], l).UsedBytes = int64(s.value)
		case mContainerLimit:
			row(KindContainer, l["container"], l).LimitBytes = ptr(int64(s.value))
		case mContainerUnlocated:
			lower[usageKey{KindContainer, l["uid"], l["container"]}] = s.value > 0
		case mNodeOldestTriggerAge:
			nodeAge[l["node"]] = max(nodeAge[l["node"]], s.value+st)
		}
	}
	out := make([]Usage, 0, len(rows))
	for k, u := range rows {
		if u.Pod == "" {
			continue // a limit without its usage: not a row (a series family filtered away)
		}
		if lower[k] {
			u.LowerBound = true
		}
		if k.kind == KindContainer && lower[usageKey{KindPod, k.uid, ""}] {
			u.LowerBound = true
		}
		age, ok := ages[k]
		if !ok && k.kind == KindContainer {
			// A container is measured with its pod: the pod's age is the container's.
			age, ok = ages[usageKey{KindPod, k.uid, ""}]
		}
		if ok {
			u.MeasurementAgeSeconds = ptr(age)
		} else if na, ok := nodeAge[u.Node]; ok && u.LimitBytes != nil {
			u.MeasurementAgeSeconds, u.MeasurementAgeIsBound = ptr(na), true
		}
		if u.LimitBytes != nil && *u.LimitBytes > 0 {
			u.Percent = ptr(100 * float64(u.UsedBytes) / float64(*u.LimitBytes))
		}
		out = append(out, *u)
	}
	SortNearestLimit(out)
	return out
}

func ptr[T any](v T) *T { return &v }
