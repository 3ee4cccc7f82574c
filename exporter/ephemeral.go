package exporter

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/emptydir-guard/emptydir-guard/exporter/part"
)

// withStorage adds to pv (podBase of pod) the pod's other ephemeral-storage parts and its
// limits, when the pod has an ephemeral-storage limit: the parts of pods without one are
// never measured (they can trigger no eviction, and would cost a walk of every writable
// layer on the node).
func withStorage(pv part.Pod, pod *corev1.Pod) part.Pod {
	st := &part.PodStorage{LimitBytes: quantityBytes(resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{}), corev1.ResourceEphemeralStorage),
		RuntimeClass: pv.RuntimeClass}
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
		st.Containers = append(st.Containers, part.Container{Name: cs.Name, ID: cs.ContainerID, LimitBytes: limits[cs.Name]})
	}
	budget := func(c *int64) *int64 { // the smallest limit a part counts toward
		if c != nil && (st.LimitBytes == nil || *c < *st.LimitBytes) {
			return c
		}
		return st.LimitBytes
	}
	for i, v := range pv.Parts {
		if v.Medium == part.MediumDisk && v.Kind == part.KindEmptyDir {
			pv.Parts[i].BudgetBytes = st.LimitBytes
		}
	}
	mounted := mountedVolumes(pod)
	for _, v := range pod.Spec.Volumes {
		switch {
		case !mounted[v.Name]:
		case v.ConfigMap != nil:
			pv.Parts = append(pv.Parts, part.Part{Name: part.NameFor(part.KindConfigMap, v.Name), Medium: part.MediumDisk, Kind: part.KindConfigMap, Container: v.Name, BudgetBytes: st.LimitBytes})
		case v.GitRepo != nil: // deprecated, but the kubelet still counts it
			pv.Parts = append(pv.Parts, part.Part{Name: part.NameFor(part.KindGitRepo, v.Name), Medium: part.MediumDisk, Kind: part.KindGitRepo, Container: v.Name, BudgetBytes: st.LimitBytes})
		}
	}
	for _, c := range st.Containers {
		pv.Parts = append(pv.Parts,
			part.Part{Name: part.NameFor(part.KindWritableLayer, c.Name), Medium: part.MediumDisk, Kind: part.KindWritableLayer, Container: c.Name, ContainerID: c.ID, BudgetBytes: budget(c.LimitBytes)},
			part.Part{Name: part.NameFor(part.KindContainerLogs, c.Name), Medium: part.MediumDisk, Kind: part.KindContainerLogs, Container: c.Name, BudgetBytes: budget(c.LimitBytes)})
	}
	pv.Parts = append(pv.Parts, part.Part{Name: part.NameFor(part.KindPodFiles, ""), Medium: part.MediumDisk, Kind: part.KindPodFiles, BudgetBytes: st.LimitBytes})
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
