package exporter

import (
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Media, as the medium label spells them.
const (
	MediumDisk      = "disk"
	MediumMemory    = "memory"
	MediumHugePages = "hugepages"
)

// Volume is one emptyDir volume of one pod, as its spec declares it.
type Volume struct {
	Name   string
	Medium string
	// LimitBytes is the sizeLimit; nil when the volume has none.
	LimitBytes *int64
}

// PodVolumes is a pod on this node with the emptyDir volumes that are set up for it.
type PodVolumes struct {
	Namespace string
	Pod       string
	UID       string
	Volumes   []Volume
}

// Dir is where the kubelet keeps one emptyDir volume of a pod below its root dir.
func Dir(kubeletRootDir, podUID, volume string) string {
	return filepath.Join(kubeletRootDir, "pods", podUID, "volumes", "kubernetes.io~empty-dir", volume)
}

// podVolumes extracts what the exporter needs of a pod. It returns false for pods
// that have no emptyDir volume in use or whose volumes are being torn down.
func podVolumes(pod *corev1.Pod) (PodVolumes, bool) {
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return PodVolumes{}, false
	}
	// The kubelet sets up only volumes that some container mounts; an unmounted
	// volume has no folder and would read as an error.
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
	pv := PodVolumes{Namespace: pod.Namespace, Pod: pod.Name, UID: string(pod.UID)}
	for _, v := range pod.Spec.Volumes {
		if v.EmptyDir == nil || !mounted[v.Name] {
			continue
		}
		vol := Volume{Name: v.Name, Medium: mediumLabel(v.EmptyDir.Medium)}
		// The kubelet enforces only a positive sizeLimit; zero means none.
		if l := v.EmptyDir.SizeLimit; l != nil && l.Sign() > 0 {
			b := l.Value()
			vol.LimitBytes = &b
		}
		pv.Volumes = append(pv.Volumes, vol)
	}
	return pv, len(pv.Volumes) > 0
}

func mediumLabel(m corev1.StorageMedium) string {
	switch {
	case m == corev1.StorageMediumMemory:
		return MediumMemory
	case strings.HasPrefix(string(m), string(corev1.StorageMediumHugePages)):
		return MediumHugePages
	default:
		return MediumDisk
	}
}
