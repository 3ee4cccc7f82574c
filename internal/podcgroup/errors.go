package podcgroup

// Why a pod has no Snapshot (Error.Reason), worded as the exporter's
// emptydir_exporter_change_marks_total reason label takes them.
const (
	// ReasonInvalid: the pod's UID or QoS class cannot name a kubelet cgroup.
	ReasonInvalid = "invalid"
	// ReasonNotFound: no layout of the kubelet's has the pod's cgroup (not made yet, gone,
	// another --cgroup-root, or --cgroups-per-qos=false).
	ReasonNotFound = "not_found"
	// ReasonAmbiguous: both drivers' layouts have a cgroup of the pod; the flags must say which.
	ReasonAmbiguous = "ambiguous"
	// ReasonUnreadable: the cgroup's counters cannot be read or parsed.
	ReasonUnreadable = "unreadable"
	// ReasonUnsound: the counters this package needs are not there (cgroup v2 without the io
	// controller in the pod's cgroup): no snapshot could vouch for the pod.
	ReasonUnsound = "unsound"
)

// Error is why a pod has no Snapshot.
type Error struct {
	// Reason is one of the Reason constants.
	Reason string
	Err    error
}

func (e *Error) Error() string { return e.Reason + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

func fail(reason string, err error) error { return &Error{Reason: reason, Err: err} }
