// Package liveapi is the contract of the exporter's live endpoint, the one definition its
// server (the exporter) and its client (the remediator) share: the route, the query, the
// answer and the error body. docs/metrics.md documents it for other callers.
package liveapi

import (
	"fmt"
	"net/url"
	"time"
)

// DefaultPort is the exporter's default port (its --web.listen-address), which the
// remediator dials by default (its --exporter.port).
const DefaultPort = 9731

// Pattern is the route of the live endpoint, in net/http ServeMux pattern syntax; its
// wildcards are PathNamespace and PathPod.
const Pattern = "GET /live/namespaces/{" + PathNamespace + "}/pods/{" + PathPod + "}"

// The path wildcards and query parameters of a live request.
const (
	PathNamespace = "namespace"
	PathPod       = "pod"
	// QueryUID names the exact pod instance (metadata.uid); required.
	QueryUID = "uid"
	// QueryVolume restricts the answer to one emptyDir volume; optional. Without it the
	// answer also has the pod's EphemeralStorage, when the exporter measures it.
	QueryVolume = "volume"
)

// URL is the live request for the volume of the pod instance namespace/pod with uid, at
// the exporter whose base URL (scheme://host:port) is base. An empty volume asks for all
// the pod's emptyDir volumes.
func URL(base, namespace, pod, uid, volume string) (*url.URL, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, fmt.Errorf("exporter URL %q: %w", base, err)
	}
	u = u.JoinPath("live", "namespaces", namespace, "pods", pod)
	q := url.Values{QueryUID: {uid}}
	if volume != "" {
		q.Set(QueryVolume, volume)
	}
	u.RawQuery = q.Encode()
	return u, nil
}

// Response is the body of a successful live measurement (200).
type Response struct {
	Node      string `json:"node"`
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	UID       string `json:"uid"`
	Source    string `json:"source"`
	// MeasuredAt is when the request's measurement started.
	MeasuredAt time.Time `json:"measuredAt"`
	Volumes    []Volume  `json:"volumes"`
	// EphemeralStorage is the pod's ephemeral-storage usage as the kubelet's pod and
	// container checks see it: set when no volume was asked for and the pod has an
	// ephemeral-storage limit the exporter measures (--collection.ephemeral-storage).
	EphemeralStorage *PodStorage `json:"ephemeralStorage,omitempty"`
}

// PodStorage is a pod's ephemeral-storage usage, every part measured for the request.
type PodStorage struct {
	// UsedBytes is what the kubelet compares with the pod's limit (calcEphemeralStorage).
	UsedBytes  int64  `json:"usedBytes"`
	LimitBytes *int64 `json:"limitBytes,omitempty"`
	// Parts splits UsedBytes: emptydir, writable_layer, logs, other.
	Parts map[string]int64 `json:"parts"`
	// LowerBound says some part is a lower bound (a writable layer not located among them).
	LowerBound bool `json:"lowerBound"`
	// IncompleteSince is set with LowerBound: since when UsedBytes has been a lower bound
	// without a break, as the exporter's own record of its walks says (see Volume).
	IncompleteSince time.Time `json:"incompleteSince,omitzero"`
	// DedicatedImageFilesystem says writable layers do not count toward their containers.
	DedicatedImageFilesystem bool `json:"dedicatedImageFilesystem"`
	// MeasuredAt is when the first part's measurement started, CompletedAt when the last ended.
	MeasuredAt  time.Time          `json:"measuredAt"`
	CompletedAt time.Time          `json:"completedAt"`
	Containers  []ContainerStorage `json:"containers"`
}

// ContainerStorage is one running container's ephemeral-storage usage.
type ContainerStorage struct {
	Name string `json:"name"`
	// UsedBytes is what the kubelet compares with the container's limit: its logs, plus its
	// writable layer unless the image filesystem is dedicated.
	UsedBytes          int64  `json:"usedBytes"`
	LimitBytes         *int64 `json:"limitBytes,omitempty"`
	WritableLayerBytes int64  `json:"writableLayerBytes"`
	LogsBytes          int64  `json:"logsBytes"`
	// WritableLayerUnlocated is why the writable layer could not be located, if it could not.
	WritableLayerUnlocated string `json:"writableLayerUnlocated,omitempty"`
	LowerBound             bool   `json:"lowerBound"`
	// IncompleteSince is set with LowerBound, as PodStorage's.
	IncompleteSince time.Time `json:"incompleteSince,omitzero"`
}

// Volume is one volume of a Response.
type Volume struct {
	Name   string `json:"name"`
	Medium string `json:"medium"`
	// UsedBytes is always set by the exporter; a pointer so that a reader tells a missing
	// value from 0 bytes.
	UsedBytes     *int64 `json:"usedBytes"`
	LimitBytes    *int64 `json:"limitBytes,omitempty"`
	CapacityBytes int64  `json:"capacityBytes"`
	InodesUsed    int64  `json:"inodesUsed"`
	// UnreadableEntries counts entries the walk could not read: when it is not 0,
	// UsedBytes is a lower bound.
	UnreadableEntries int64 `json:"unreadableEntries"`
	// ChangedDirectories counts directories the walk did not see as they were when it started (gone
	// or swapped when it came to enter them, or changed before it had read them to the end):
	// when it is not 0, data may have moved past the walk, and UsedBytes is a lower bound.
	ChangedDirectories int64 `json:"changedDirectories,omitempty"`
	// CutShort says that the walk hit its deadline, or exhausted a live CPU budget of its
	// caller, before reading every directory: UsedBytes is what it counted until then, a lower
	// bound.
	CutShort bool `json:"cutShort,omitempty"`
	// LowerBound says that UsedBytes is a lower bound, for any of the reasons above. A client
	// should also take UnreadableEntries, ChangedDirectories or CutShort alone as one: exporters
	// before LowerBound sent UnreadableEntries only.
	LowerBound bool `json:"lowerBound"`
	// IncompleteSince is set with LowerBound: when the first of the volume's consecutive
	// lower-bound measurements started, this one included, from the exporter's own record of
	// its walks (periodic and live): this walk's start when the one before was complete. It is
	// the exporter's evidence that a volume has been measurable only as a lower bound for a
	// while, on which the remediator's --policy.evict-incomplete-after decides. Left out when
	// complete, and by exporters before it was added: a client takes no value as "not known".
	IncompleteSince time.Time `json:"incompleteSince,omitzero"`
	// MeasuredAt is when the volume's walk started, CompletedAt when it ended (for the
	// kubelet source, both are the kubelet's stats time).
	MeasuredAt  time.Time `json:"measuredAt"`
	CompletedAt time.Time `json:"completedAt"`
}

// Error is the body of every answer other than 200.
type Error struct {
	Error string `json:"error"`
}
