package exporter

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/emptydir-guard/emptydir-guard/exporter/part"
)

// podVolumes extracts what the exporter needs of a pod's emptyDir volumes. It returns false
// for pods that have no emptyDir volume in use or whose volumes are being torn down.
func podVolumes(pod *corev1.Pod) (part.Pod, bool) {
	pv, ok := podBase(pod)
	if !ok {
		return part.Pod{}, false
	}
	return pv, len(pv.Parts) > 0
}

// podBase is pod with its emptyDir volumes in use; false when the pod's volumes are gone
// (it has ended) or it cannot be a pod the kubelet runs.
func podBase(pod *corev1.Pod) (part.Pod, bool) {
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return part.Pod{}, false
	}
	pv := part.Pod{Namespace: pod.Namespace, Pod: pod.Name, UID: string(pod.UID), QOSClass: string(pod.Status.QOSClass),
		RuntimeClass:  ptr.Deref(pod.Spec.RuntimeClassName, ""),
		Settling:      pod.Status.Phase == corev1.PodPending || pod.Status.Phase == "" || pod.DeletionTimestamp != nil,
		UserNamespace: pod.Spec.HostUsers != nil && !*pod.Spec.HostUsers, Workload: podWorkload(pod)}
	if hash, static := pod.Annotations[corev1.MirrorPodAnnotationKey]; static {
		// Anyone who may create pods may set this annotation, and it becomes a directory
		// name: accept only what a kubelet writes there (a hex hash, or a manifest's
		// own metadata.uid), never a path.
		if !isConfigHash(hash) {
			return part.Pod{}, false
		}
		pv.ConfigHash = hash
	}
	mounted := mountedVolumes(pod)
	for _, v := range pod.Spec.Volumes {
		if v.EmptyDir == nil || !mounted[v.Name] {
			continue
		}
		vol := part.Part{Name: v.Name, Medium: mediumLabel(v.EmptyDir.Medium)}
		// The kubelet enforces only a positive sizeLimit; zero means none.
		if l := v.EmptyDir.SizeLimit; l != nil && l.Sign() > 0 {
			b := l.Value()
			vol.LimitBytes = &b
		}
		pv.Parts = append(pv.Parts, vol)
	}
	return pv, true
}

// mountedVolumes names the volumes some container mounts: the kubelet sets up only those,
// and an unmounted volume has no directory and would read as an error.
func mountedVolumes(pod *corev1.Pod) map[string]bool {
	mounted := map[string]bool{}
	for _, c := range pod.Spec.InitContainers {
		for _, m := range c.VolumeMounts {
			mounted[m.Name] = true
		}
	}
	for _, c := range pod.Spec.Containers {
		for _, m := range c.VolumeMounts {
			mounted[m.Name] = true
		}
	}
	for _, c := range pod.Spec.EphemeralContainers {
		for _, m := range c.VolumeMounts {
			mounted[m.Name] = true
		}
	}
	return mounted
}

// isConfigHash reports whether s can be a static pod's config hash: one safe path element.
func isConfigHash(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for _, r := range s {
		if (r < '0' || r > '9') && (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && r != '-' && r != '_' {
			return false
		}
	}
	return true
}

func mediumLabel(m corev1.StorageMedium) string {
	switch {
	case m == corev1.StorageMediumMemory:
		return part.MediumMemory
	case strings.HasPrefix(string(m), string(corev1.StorageMediumHugePages)):
		return part.MediumHugePages
	default:
		return part.MediumDisk
	}
}
