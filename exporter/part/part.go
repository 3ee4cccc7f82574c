package part

import (
	"fmt"
	"path/filepath"
)

// Media, as the medium label spells them.
const (
	MediumDisk      = "disk"
	MediumMemory    = "memory"
	MediumHugePages = "hugepages"
)

// Part is one storage part of one pod the exporter measures: an emptyDir volume, as its spec
// declares it, or (Kind) another part of the pod's ephemeral storage.
type Part struct {
	// Name is the emptyDir volume's name; for the other kinds a name no volume can have
	// (NameFor), unique within the pod.
	Name   string
	Medium string
	// LimitBytes is the sizeLimit; nil when the volume has none (and for the other kinds).
	LimitBytes *int64
	// Kind is what is measured; the zero value is an emptyDir volume.
	Kind Kind
	// Container is the container whose writable layer or logs this is.
	Container string
	// ContainerID is the runtime's ID of that container (a writable layer only), from the
	// pod's status: "containerd://<id>".
	ContainerID string
	// BudgetBytes is the smallest ephemeral-storage limit (the pod's or its container's) the
	// part counts toward; nil when none. With LimitBytes it makes the part guarded: walked
	// every cycle, as what can trigger an eviction.
	BudgetBytes *int64
}

// Describe names v in messages.
func (v Part) Describe() string {
	switch v.Kind {
	case KindEmptyDir:
		return fmt.Sprintf("volume %q", v.Name)
	case KindWritableLayer:
		return fmt.Sprintf("the writable layer of container %q", v.Container)
	case KindContainerLogs:
		return fmt.Sprintf("the logs of container %q", v.Container)
	default:
		return v.Name
	}
}

// Guard is the limit that makes v urgent: its sizeLimit, else the smallest ephemeral-storage
// limit it counts toward; nil when nothing it holds can trigger an eviction.
func (v Part) Guard() *int64 {
	if v.LimitBytes != nil {
		return v.LimitBytes
	}
	return v.BudgetBytes
}

// Pod is a pod on this node with the emptyDir volumes that are set up for it.
type Pod struct {
	Namespace string
	Pod       string
	// UID is the pod's UID in the API: the uid label, and what the remediator evicts by.
	UID string
	// ConfigHash is set for a static pod only: the kubelet knows such a pod by the hash
	// of its manifest, not by the UID of the mirror pod the API server shows.
	ConfigHash string
	Parts      []Part
	// Storage is the pod's ephemeral-storage limits and containers; nil when the exporter
	// measures emptyDir volumes only (the pod has no such limit, or the measurement is off).
	Storage *PodStorage
	// QOSClass is the pod's status.qosClass, set by the API server: which of the kubelet's QoS
	// cgroups holds the pod's (Config.ChangeSignal).
	QOSClass string
	// RuntimeClass is the pod's spec.runtimeClassName, "" for the node's default runtime: a
	// sandboxed runtime's pod writes through processes outside its cgroup, which the change
	// signal does not see (Config.ChangeSignalRuntimeClasses).
	RuntimeClass string
	// UserNamespace is set for a pod with hostUsers: false: its root is no root of the node,
	// and cannot change the project IDs the kubelet put its volumes under.
	UserNamespace bool
	// Settling is set while the kubelet may not have set the pod's volumes up yet
	// (Pending) or may have torn them down already (deletion requested): a volume
	// that is not there then holds nothing, and is no failure to measure it.
	Settling bool
	// Workload is the pod's controller, as recommendations pool pods (Workload).
	Workload Workload
}

// KubeletUID is the UID the kubelet knows the pod by: the name of its directory below
// <root-dir>/pods and the UID in the Summary API's pod reference.
func (p Pod) KubeletUID() string {
	if p.ConfigHash != "" {
		return p.ConfigHash
	}
	return p.UID
}

// Key names one volume of one pod on the node: the pod's UID and the volume's name.
type Key struct{ UID, Name string }

// EmptyDirPath is where the kubelet keeps one emptyDir volume of a pod below its root dir; podUID
// is the pod's KubeletUID. Both names come from the API server (a UID it assigned or a
// checked config hash, a volume name it validated as a DNS label), never from a request.
func EmptyDirPath(kubeletRootDir, podUID, volume string) string {
	return filepath.Join(kubeletRootDir, "pods", podUID, "volumes", "kubernetes.io~empty-dir", volume)
}

// Workload names the controller a pod belongs to, as recommendations pool pods
// (internal/recommend): Kind is Deployment, StatefulSet, DaemonSet, Job, ReplicaSet (one no
// Deployment manages), another controller's kind, or Pod for a pod without a controller (and
// a static pod, whose controller is its Node).
type Workload struct {
	Kind, Name string
	// OwnerInvalid says why a pod whose controller reference names no valid kind ("kind") or
	// object name ("name") is its own workload; empty otherwise.
	OwnerInvalid string
}

// OverLimit is how far used exceeds limit, compared as the kubelet compares them (strictly, a
// limit of 0 being none), and whether it does: the value of the over-limit series.
func OverLimit(used int64, limit *int64) (int64, bool) {
	if limit == nil || *limit <= 0 || used <= *limit {
		return 0, false
	}
	return used - *limit, true
}
