package calibrate

import (
	"errors"
	"fmt"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
)

// ErrStatusPending: the kubelet has not yet written the container's ID into the pod's status.
var ErrStatusPending = errors.New("the pod's status has no container ID or QoS class yet")

// OwnPod reads Pod from the exporter's own pod as the API server returns it: the container
// that mounts an emptyDir of the pod's at dir, that container's runtime ID from the status the
// kubelet wrote.
func OwnPod(pod *corev1.Pod, dir string) (*Pod, error) {
	dir = filepath.Clean(dir)
	emptyDirs := map[string]bool{}
	for _, v := range pod.Spec.Volumes {
		if v.EmptyDir != nil {
			emptyDirs[v.Name] = true
		}
	}
	for _, c := range pod.Spec.Containers {
		for _, m := range c.VolumeMounts {
			if !emptyDirs[m.Name] || filepath.Clean(m.MountPath) != dir || m.SubPath != "" || m.SubPathExpr != "" {
				continue
			}
			p := &Pod{Namespace: pod.Namespace, Name: pod.Name, UID: string(pod.UID), QOSClass: string(pod.Status.QOSClass),
				Container: c.Name, Volume: m.Name, VolumeDir: dir}
			for _, s := range pod.Status.ContainerStatuses {
				if s.Name == c.Name {
					p.ContainerID = s.ContainerID
				}
			}
			if p.ContainerID == "" || p.QOSClass == "" {
				return nil, fmt.Errorf("pod %s/%s, container %s: %w", pod.Namespace, pod.Name, c.Name, ErrStatusPending)
			}
			return p, nil
		}
	}
	return nil, fmt.Errorf("pod %s/%s: no container mounts an emptyDir of the pod's at %s", pod.Namespace, pod.Name, dir)
}
