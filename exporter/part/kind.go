package part

import "strings"

// Kind is what a Part measures: an emptyDir volume or another part of a pod's ephemeral
// storage, as the kubelet adds it up (calcEphemeralStorage in pkg/kubelet/stats/helper.go,
// v1.37).
type Kind uint8

const (
	// KindEmptyDir is an emptyDir volume: <root>/pods/<uid>/volumes/kubernetes.io~empty-dir/<name>.
	KindEmptyDir Kind = iota
	// KindConfigMap is a configMap volume, which the kubelet counts as local ephemeral storage
	// (IsLocalEphemeralVolume, pkg/volume/util): kubernetes.io~configmap/<name>.
	KindConfigMap
	// KindGitRepo is a gitRepo volume, counted likewise: kubernetes.io~git-repo/<name>.
	KindGitRepo
	// KindWritableLayer is a running container's writable layer: the upper directory of its
	// overlay root filesystem.
	KindWritableLayer
	// KindContainerLogs is a running container's log files: <pod-logs-dir>/<ns>_<pod>_<uid>/<container>.
	KindContainerLogs
	// KindPodFiles is what the kubelet keeps for the pod itself: its etc-hosts file and the
	// files directly in its log directory.
	KindPodFiles
)

// Parts of a pod's ephemeral storage, as the part label spells them.
const (
	LabelEmptyDir      = "emptydir"
	LabelWritableLayer = "writable_layer"
	LabelLogs          = "logs"
	// LabelOther: configMap and gitRepo volumes, etc-hosts and the pod's own log files.
	LabelOther = "other"
)

// Cheap reports whether measuring k takes a few stats of files the kubelet or the runtime
// writes (logs, etc-hosts), not a walk of a tenant's tree: the CPU budget never holds it back.
func (k Kind) Cheap() bool { return k == KindContainerLogs || k == KindPodFiles }

// Label is the part label of what k measures.
func (k Kind) Label() string {
	switch k {
	case KindEmptyDir:
		return LabelEmptyDir
	case KindWritableLayer:
		return LabelWritableLayer
	case KindContainerLogs:
		return LabelLogs
	default:
		return LabelOther
	}
}

// PodStorage is what the kubelet's two ephemeral-storage checks compare (eviction_manager.go,
// podEphemeralStorageLimitEviction and containerEphemeralStorageLimitEviction, v1.37).
type PodStorage struct {
	// LimitBytes is PodLimits(pod)[ephemeral-storage], as the kubelet computes it; nil when
	// no container has such a limit.
	LimitBytes *int64
	// Containers are the pod's running containers, ephemeral ones included, whose writable
	// layers and logs count.
	Containers []Container
	// RuntimeClass is the pod's spec.runtimeClassName, "" for the node's default runtime: a
	// sandboxed runtime (Kata, Firecracker) is the usual reason a layer cannot be located.
	RuntimeClass string
}

// Container is one running container of a pod.
type Container struct {
	Name string
	// ID is the runtime's ID from the pod's status, "<runtime>://<id>".
	ID string
	// LimitBytes is its limits.ephemeral-storage, for a container the kubelet checks (a
	// regular or a restartable init container); nil when none, and for an ephemeral container.
	LimitBytes *int64
}

// NameFor names the kinds other than emptyDir: a "/" never appears in a volume name (a DNS
// label), so none can collide with an emptyDir's.
func NameFor(k Kind, name string) string {
	switch k {
	case KindConfigMap:
		return "configmap/" + name
	case KindGitRepo:
		return "git-repo/" + name
	case KindWritableLayer:
		return "container/" + name + "/writable-layer"
	case KindContainerLogs:
		return "container/" + name + "/logs"
	default:
		return "pod/files"
	}
}

// RuntimeID splits a container ID of a pod's status, "<runtime>://<id>".
func RuntimeID(id string) (runtime, cid string, ok bool) {
	return strings.Cut(id, "://")
}
