package remediator

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// evict asks the Eviction API to evict the pod with uid, with reason as annotation. The UID
// precondition makes the API server refuse (409) to evict a pod recreated under the same
// name since the alert fired. It returns the eviction result label and the error.
func (s *Server) evict(ctx context.Context, pod *corev1.Pod, uid types.UID, reason string) (string, error) {
	del := &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}
	if s.cfg.GracePeriodSeconds >= 0 {
		g := s.cfg.GracePeriodSeconds
		del.GracePeriodSeconds = &g
	}
	ev := &policyv1.Eviction{
		ObjectMeta: metav1.ObjectMeta{
			Name:        pod.Name,
			Namespace:   pod.Namespace,
			Annotations: map[string]string{EvictionReasonAnnotation: reason},
		},
		DeleteOptions: del,
	}
	err := s.client.PolicyV1().Evictions(pod.Namespace).Evict(ctx, ev)
	switch {
	case err == nil:
		return EvictionEvicted, nil
	case apierrors.IsTooManyRequests(err):
		return EvictionPDBBlocked, fmt.Errorf("eviction of pod %s/%s blocked: %w", pod.Namespace, pod.Name, err)
	case apierrors.IsNotFound(err):
		return EvictionNotFound, fmt.Errorf("evicting pod %s/%s: %w", pod.Namespace, pod.Name, err)
	default:
		return EvictionError, fmt.Errorf("evicting pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
}
