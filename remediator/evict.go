package remediator

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

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

// blockedReuseMaxAge bounds how long after its walk the over-limit measurement of a pod whose
// eviction a PodDisruptionBudget refused answers the retries while a dry-run eviction is still
// refused: Alertmanager retries about ten times a minute, each a walk otherwise.
const blockedReuseMaxAge = time.Minute

// answerStillBlocked answers the retries of a PDB-refused eviction without walking the volume again.
func (s *Server) answerStillBlocked(ctx context.Context, r *remediation) (bool, error) {
	// A pod whose eviction a PodDisruptionBudget refused lately, over its limit then: while a
	// dry-run eviction is still refused, the retry is answered from that measurement instead
	// of walking the volume again, which spent the node's live budget on each of
	// Alertmanager's retries. Nothing is done on it: once the budget lets go, or after
	// blockedReuseMaxAge, the pod is measured anew.
	t, pod, subject, limit := r.t, r.pod, r.subject, r.limit
	m, ok := s.blocked.get(t.UID, subject, s.now())
	if !ok || !overLimit(m.UsedBytes, limit, s.cfg.ThresholdRatio) {
		return false, nil
	}
	result, err := s.evict(ctx, pod, types.UID(t.UID), kubeletMessage(subject, limit), true)
	if result == EvictionPDBBlocked {
		s.metrics.evictions.WithLabelValues(result).Inc()
		s.metrics.measureReused.Inc()
		usage := s.recordUsage(r.res, subject, m, limit)
		r.decide(OutcomePDBBlocked, "pdb", "%s; eviction still blocked by a PodDisruptionBudget (dry run), retry later", usage)
		s.recorder.Eventf(pod, nil, corev1.EventTypeWarning, EventEvictionBlocked, ActionEvict, "%s; eviction blocked: %s", usage, errorText(err))
		return true, err
	}
	s.blocked.forget(t.UID, subject)
	return false, nil
}

// dryRun records and reports what would be evicted, when the remediator only says so.
func (s *Server) dryRun(ctx context.Context, r *remediation) (bool, error) {
	if !s.cfg.DryRun {
		return false, nil
	}
	s.commitSlot(ctx, r.slot, OutcomeDryRun, r.now)
	s.metrics.evictions.WithLabelValues(EvictionDryRun).Inc()
	r.decide(OutcomeDryRun, "", "%s; dry run: would evict", r.usage)
	s.recorder.Eventf(r.pod, nil, corev1.EventTypeWarning, EventOverLimit, ActionCheck, "%s; dry run: would evict", r.usage)
	return true, nil
}

// evictPod sends the Eviction, in the kubelet's own words, only while the Lease is surely ours.
func (s *Server) evictPod(ctx context.Context, r *remediation) (string, error) {
	// An Eviction request still waiting (in the client's rate limiter, for a connection)
	// when the Lease may have passed to another replica is never sent.
	if !r.leaseEnd.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, r.leaseEnd)
		defer cancel()
	}
	// The kubelet's own words first: an eviction reads the same whoever made it.
	return s.evict(ctx, r.pod, types.UID(r.t.UID), r.kubeletSays+" "+r.usage, false)
}

// recordEviction keeps or gives back the cap slot and reports what the Eviction API answered.
func (s *Server) recordEviction(ctx context.Context, r *remediation, result string, err error) error {
	pod, usage := r.pod, r.usage
	s.metrics.evictions.WithLabelValues(result).Inc()
	switch result {
	case EvictionEvicted:
		s.commitSlot(ctx, r.slot, OutcomeEvicted, r.now)
		r.decide(OutcomeEvicted, "", "%s; evicted", usage)
		s.recorder.Eventf(pod, nil, corev1.EventTypeWarning, EventEvicted, ActionEvict, "Evicted: %s %s", r.kubeletSays, usage)
		return nil
	case EvictionNotFound:
		s.releaseSlot(ctx, r.slot)
		r.decide(OutcomeGone, "not_found", "pod %s/%s disappeared before the eviction", r.t.Namespace, r.t.Pod)
		return nil
	case EvictionPDBBlocked:
		s.releaseSlot(ctx, r.slot)
		s.blocked.put(r.t.UID, r.subject, r.m, s.now())
		r.decide(OutcomePDBBlocked, "pdb", "%s; eviction blocked by a PodDisruptionBudget, retry later", usage)
		s.recorder.Eventf(pod, nil, corev1.EventTypeWarning, EventEvictionBlocked, ActionEvict, "%s; eviction blocked: %s", usage, errorText(err))
		return err
	case EvictionThrottled:
		// The API server protecting itself says nothing about the pod: no Event on it.
		s.releaseSlot(ctx, r.slot)
		r.decide(OutcomeThrottled, "throttled", "%s; eviction throttled by the API server (%s), retry later", usage, errorText(err))
		return err
	case EvictionUnconfirmed:
		// The eviction may have happened: giving the slot back could let one more pod
		// through the caps. The retry sees the pod gone, or tries again in this slot.
		s.commitSlot(ctx, r.slot, outcomeUnconfirmed, r.now)
		r.decide(OutcomeError, "eviction_unconfirmed", "%s; the Eviction API's answer was lost (%s): the pod may be evicted, its cap slot stays held; retry", usage, errorText(err))
		s.recorder.Eventf(pod, nil, corev1.EventTypeWarning, EventEvictionFailed, ActionEvict, "%s; eviction not confirmed: %s", usage, errorText(err))
		return err
	default:
		s.releaseSlot(ctx, r.slot)
		r.decide(OutcomeError, "eviction_failed", "%s; eviction failed: %s", usage, errorText(err))
		s.recorder.Eventf(pod, nil, corev1.EventTypeWarning, EventEvictionFailed, ActionEvict, "%s; eviction failed: %s", usage, errorText(err))
		return err
	}
}

// errorText is the API server's message of err, without the wrapping.
func errorText(err error) string {
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		return se.Status().Message
	}
	if err == nil {
		return ""
	}
	return err.Error()
}
