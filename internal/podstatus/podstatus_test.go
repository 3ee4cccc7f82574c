package podstatus

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestReady(t *testing.T) {
	cond := func(typ corev1.PodConditionType, status corev1.ConditionStatus) corev1.PodCondition {
		return corev1.PodCondition{Type: typ, Status: status}
	}
	for _, tc := range []struct {
		name       string
		conditions []corev1.PodCondition
		want       bool
	}{
		{"no conditions", nil, false},
		{"ready", []corev1.PodCondition{cond(corev1.PodReady, corev1.ConditionTrue)}, true},
		{"not ready", []corev1.PodCondition{cond(corev1.PodReady, corev1.ConditionFalse)}, false},
		{"ready unknown", []corev1.PodCondition{cond(corev1.PodReady, corev1.ConditionUnknown)}, false},
		{"only other conditions true", []corev1.PodCondition{cond(corev1.PodScheduled, corev1.ConditionTrue),
			cond(corev1.ContainersReady, corev1.ConditionTrue), cond(corev1.PodInitialized, corev1.ConditionTrue)}, false},
		{"ready among others", []corev1.PodCondition{cond(corev1.PodScheduled, corev1.ConditionTrue),
			cond(corev1.PodReady, corev1.ConditionTrue)}, true},
		{"not ready among others true", []corev1.PodCondition{cond(corev1.ContainersReady, corev1.ConditionTrue),
			cond(corev1.PodReady, corev1.ConditionFalse)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &corev1.Pod{Status: corev1.PodStatus{Conditions: tc.conditions}}
			if got := Ready(p); got != tc.want {
				t.Errorf("Ready = %v, want %v", got, tc.want)
			}
		})
	}
}
