// Package podstatus reads what the kubelet reports of a pod, for the plugin and the remediator
// alike.
package podstatus

import corev1 "k8s.io/api/core/v1"

// Ready reports whether the pod's Ready condition is True: all its containers pass their
// readiness probes. A pod without the condition (not yet scheduled or started) is not ready.
func Ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
