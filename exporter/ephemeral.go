package exporter

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/utils/ptr"
)

// Kind is what a Volume measures: an emptyDir volume or another part of a pod's ephemeral
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
	// files directly in its log folder.
	KindPodFiles
)

// Parts of a pod's ephemeral storage, as the part label spells them.
const (
	PartEmptyDir      = "emptydir"
	PartWritableLayer = "writable_layer"
	PartLogs          = "logs"
	// PartOther: configMap and gitRepo volumes, etc-hosts and the pod's own log files.
	PartOther = "other"
)

// cheap reports whether measuring k takes a few stats of files the kubelet or the runtime
// writes (logs, etc-hosts), not a walk of a tenant's tree: the CPU budget never holds it back.
func (k Kind) cheap() bool { return k == KindContainerLogs || k == KindPodFiles }

// part is the part label of what k measures.
func (k Kind) part() string {
	switch k {
	case KindEmptyDir:
		return PartEmptyDir
	case KindWritableLayer:
		return PartWritableLayer
	case KindContainerLogs:
		return PartLogs
	default:
		return PartOther
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

// partNames of the kinds other than emptyDir: a "/" never appears in a volume name (a DNS
// label), so none can collide with an emptyDir's.
func partName(k Kind, name string) string {
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

// withStorage adds to pv (podBase of pod) the pod's other ephemeral-storage parts and its
// limits, when the pod has an ephemeral-storage limit: the parts of pods without one are
// never measured (they can trigger no eviction, and would cost a walk of every writable
// layer on the node).
func withStorage(pv PodVolumes, pod *corev1.Pod) PodVolumes {
	st := &PodStorage{LimitBytes: quantityBytes(resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{}), corev1.ResourceEphemeralStorage),
		RuntimeClass: ptr.Deref(pod.Spec.RuntimeClassName, "")}
	limits := map[string]*int64{}
	for _, c := range pod.Spec.Containers {
		limits[c.Name] = quantityBytes(c.Resources.Limits, corev1.ResourceEphemeralStorage)
	}
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			limits[c.Name] = quantityBytes(c.Resources.Limits, corev1.ResourceEphemeralStorage)
		}
	}
	anyLimit := st.LimitBytes != nil
	for _, l := range limits {
		anyLimit = anyLimit || l != nil
	}
	if !anyLimit {
		return pv
	}
	// The kubelet counts running containers only (removeTerminatedContainers in
	// cri_stats_provider.go): an exited one's layer is no longer mounted and its logs stay
	// out of the pod's total. It counts every one the runtime runs in the pod's sandbox, so
	// ephemeral (debug) containers too: they have no limit of their own (the API gives them no
	// resources), but their layer and logs count toward the pod's.
	statuses := slices.Concat(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses, pod.Status.EphemeralContainerStatuses)
	for _, cs := range statuses {
		if cs.State.Running == nil || cs.ContainerID == "" {
			continue
		}
		st.Containers = append(st.Containers, Container{Name: cs.Name, ID: cs.ContainerID, LimitBytes: limits[cs.Name]})
	}
	budget := func(c *int64) *int64 { // the smallest limit a part counts toward
		if c != nil && (st.LimitBytes == nil || *c < *st.LimitBytes) {
			return c
		}
		return st.LimitBytes
	}
	for i, v := range pv.Volumes {
		if v.Medium == MediumDisk && v.Kind == KindEmptyDir {
			pv.Volumes[i].BudgetBytes = st.LimitBytes
		}
	}
	mounted := mountedVolumes(pod)
	for _, v := range pod.Spec.Volumes {
		switch {
		case !mounted[v.Name]:
		case v.ConfigMap != nil:
			pv.Volumes = append(pv.Volumes, Volume{Name: partName(KindConfigMap, v.Name), Medium: MediumDisk, Kind: KindConfigMap, Container: v.Name, BudgetBytes: st.LimitBytes})
		case v.GitRepo != nil: // deprecated, but the kubelet still counts it
			pv.Volumes = append(pv.Volumes, Volume{Name: partName(KindGitRepo, v.Name), Medium: MediumDisk, Kind: KindGitRepo, Container: v.Name, BudgetBytes: st.LimitBytes})
		}
	}
	for _, c := range st.Containers {
		pv.Volumes = append(pv.Volumes,
			Volume{Name: partName(KindWritableLayer, c.Name), Medium: MediumDisk, Kind: KindWritableLayer, Container: c.Name, ContainerID: c.ID, BudgetBytes: budget(c.LimitBytes)},
			Volume{Name: partName(KindContainerLogs, c.Name), Medium: MediumDisk, Kind: KindContainerLogs, Container: c.Name, BudgetBytes: budget(c.LimitBytes)})
	}
	pv.Volumes = append(pv.Volumes, Volume{Name: partName(KindPodFiles, ""), Medium: MediumDisk, Kind: KindPodFiles, BudgetBytes: st.LimitBytes})
	pv.Storage = st
	return pv
}

// quantityBytes is list[name] in bytes; nil when absent or zero (the kubelet checks only a
// limit whose value is not 0).
func quantityBytes(list corev1.ResourceList, name corev1.ResourceName) *int64 {
	q, ok := list[name]
	if !ok || q.Sign() <= 0 {
		return nil
	}
	b := q.Value()
	return &b
}

// runtimeID splits a container ID of a pod's status, "<runtime>://<id>".
func runtimeID(id string) (runtime, cid string, ok bool) {
	return strings.Cut(id, "://")
}
