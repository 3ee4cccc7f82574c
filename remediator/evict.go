package remediator

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// evict asks the Eviction API to evict the pod with uid, with reason as annotation. The UID
// precondition makes the API server refuse (409) to evict a pod recreated under the same
// name since the alert fired. A dry run only asks whether the eviction would be allowed now
// (PodDisruptionBudgets included) and evicts nothing. It returns the eviction result label
// and the error.
func (s *Server) evict(ctx context.Context, pod *corev1.Pod, uid types.UID, reason string, dryRun bool) (string, error) {
	del := &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}
	if dryRun {
		del.DryRun = []string{metav1.DryRunAll}
	}
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
	case apierrors.IsTooManyRequests(err) && disruptionBudgetRefusal(err):
		return EvictionPDBBlocked, fmt.Errorf("eviction of pod %s/%s blocked by a PodDisruptionBudget: %w", pod.Namespace, pod.Name, err)
	case apierrors.IsTooManyRequests(err):
		return EvictionThrottled, fmt.Errorf("eviction of pod %s/%s throttled by the API server: %w", pod.Namespace, pod.Name, err)
	case apierrors.IsNotFound(err):
		return EvictionNotFound, fmt.Errorf("evicting pod %s/%s: %w", pod.Namespace, pod.Name, err)
	case refused(err):
		return EvictionError, fmt.Errorf("evicting pod %s/%s: %w", pod.Namespace, pod.Name, err)
	default:
		return EvictionUnconfirmed, fmt.Errorf("evicting pod %s/%s, no answer that says whether it happened: %w", pod.Namespace, pod.Name, err)
	}
}

// refused reports whether err is an answer proving the request was not carried out: a
// Status with a 4xx code other than 408. A 5xx, a timeout, a broken connection or the
// client's own deadline may come after the API server wrote the eviction to etcd (its
// timeout filter answers 504 while the handler goes on), so none of them proves anything.
func refused(err error) bool {
	var se apierrors.APIStatus
	if !errors.As(err, &se) {
		return false
	}
	code := se.Status().Code
	return code >= 400 && code < 500 && code != http.StatusRequestTimeout
}

// disruptionBudgetRefusal reports whether a 429 is the Eviction API's PodDisruptionBudget
// refusal. The Eviction API names the budget in a status cause of type DisruptionBudget
// (k8s.io/kubernetes pkg/registry/core/pod/storage/eviction.go); API Priority and Fairness
// and the max-inflight filter answer 429 with Retry-After and no Status at all. The cause is
// in the body, so it survives WithoutEvictionRetries stripping Retry-After.
func disruptionBudgetRefusal(err error) bool {
	var se apierrors.APIStatus
	if !errors.As(err, &se) {
		return false
	}
	d := se.Status().Details
	if d == nil {
		return false
	}
	for _, c := range d.Causes {
		if c.Type == policyv1.DisruptionBudgetCause {
			return true
		}
	}
	return false
}
