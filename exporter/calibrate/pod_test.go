package calibrate

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// exporterPod is the exporter's pod as the API server returns it; apply varies it.
func exporterPod(apply func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "guard", Name: "exporter-x1", UID: ownUID},
		Spec: corev1.PodSpec{
			Volumes: []corev1.Volume{
				{Name: "kubelet-pods", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/lib/kubelet/pods"}}},
				{Name: "calibration", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			},
			Containers: []corev1.Container{
				{Name: "sidecar"},
				{Name: "exporter", VolumeMounts: []corev1.VolumeMount{
					{Name: "kubelet-pods", MountPath: "/host"},
					{Name: "calibration", MountPath: "/run/emptydir-exporter/calibration", ReadOnly: true},
				}},
			},
		},
		Status: corev1.PodStatus{QOSClass: corev1.PodQOSBurstable, ContainerStatuses: []corev1.ContainerStatus{
			{Name: "sidecar", ContainerID: "containerd://" + "ff"},
			{Name: "exporter", ContainerID: "containerd://" + ownCID},
		}},
	}
	if apply != nil {
		apply(p)
	}
	return p
}

// TestOwnPod: the container that mounts an emptyDir of the pod's at the directory, its ID from
// the status; an error for a directory no container mounts an emptyDir at, and ErrStatusPending
// (retried) before the kubelet has written the ID.
func TestOwnPod(t *testing.T) {
	const dir = "/run/emptydir-exporter/calibration/"
	got, err := OwnPod(exporterPod(nil), dir)
	want := ownPod("/run/emptydir-exporter/calibration")
	if err != nil || *got != *want {
		t.Fatalf("OwnPod = %+v, %v; want %+v", got, err, want)
	}
	for name, apply := range map[string]func(*corev1.Pod){
		"hostPath at the directory": func(p *corev1.Pod) { p.Spec.Containers[1].VolumeMounts[1].Name = "kubelet-pods" },
		"subPath of the emptyDir":   func(p *corev1.Pod) { p.Spec.Containers[1].VolumeMounts[1].SubPath = "x" },
		"elsewhere":                 func(p *corev1.Pod) { p.Spec.Containers[1].VolumeMounts[1].MountPath = "/tmp" },
	} {
		if p, err := OwnPod(exporterPod(apply), dir); err == nil || errors.Is(err, ErrStatusPending) {
			t.Errorf("%s: OwnPod = %+v, %v; want an error other than ErrStatusPending", name, p, err)
		}
	}
	pending := exporterPod(func(p *corev1.Pod) { p.Status.ContainerStatuses = p.Status.ContainerStatuses[:1] })
	if p, err := OwnPod(pending, dir); !errors.Is(err, ErrStatusPending) {
		t.Errorf("no status of the container yet: OwnPod = %+v, %v; want ErrStatusPending", p, err)
	}
}
