package remediator

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// What brought an alert to the remediator: the audit line says so for a notice.
const (
	viaWebhook = ""
	viaNotice  = "notice"
)

// handleAlert handles one alert of a payload: it never returns an error, it reports.
func (s *Server) handleAlert(ctx context.Context, idx int, a Alert) AlertResult {
	return s.handle(ctx, idx, a, viaWebhook)
}

// handle takes every step for the alert a, delivered as via says.
func (s *Server) handle(ctx context.Context, idx int, a Alert, via string) AlertResult {
	res := AlertResult{Index: idx, Fingerprint: a.Fingerprint, Target: a.Target()}
	var err error
	if a.Status == StatusResolved {
		res.Outcome, res.Message = OutcomeResolved, "resolved alerts are acknowledged and ignored"
	} else {
		// One alert per pod UID at a time: duplicates wait, then see the first one's eviction.
		unlock := s.locks.lock(res.Target.UID)
		err = s.remediate(ctx, &res)
		unlock()
	}
	s.metrics.alerts.WithLabelValues(string(res.Outcome)).Inc()
	if res.Outcome == OutcomeSkipped {
		s.metrics.skips.WithLabelValues(res.Reason).Inc()
	}
	s.audit(ctx, a, via, res, err)
	return res
}

// audit writes the one structured log line per alert.
func (s *Server) audit(ctx context.Context, a Alert, via string, res AlertResult, err error) {
	level := slog.LevelInfo
	if res.Outcome.Retryable() {
		level = slog.LevelWarn
	}
	attrs := []slog.Attr{
		slog.String("outcome", string(res.Outcome)),
		slog.String("reason", res.Reason),
		slog.String("namespace", res.Target.Namespace),
		slog.String("pod", res.Target.Pod),
		slog.String("uid", res.Target.UID),
		slog.String("check", res.Target.Check),
		slog.String("volume", res.Target.Volume),
		slog.String("container", res.Target.Container),
		slog.String("node", res.Node),
		slog.String("fingerprint", a.Fingerprint),
		slog.Time("starts_at", a.StartsAt),
		slog.Bool("dry_run", s.cfg.DryRun),
		slog.String("message", res.Message),
	}
	if via != viaWebhook {
		// A notice is no Alertmanager alert: it has no fingerprint, no startsAt.
		attrs = slices.DeleteFunc(attrs, func(a slog.Attr) bool { return a.Key == "fingerprint" || a.Key == "starts_at" })
		attrs = append(attrs, slog.String("via", via))
	}
	if res.UsedBytes != nil {
		attrs = append(attrs, slog.Int64("used_bytes", *res.UsedBytes), slog.String("measurement_source", res.Source))
	}
	if res.UnreadableEntries > 0 {
		attrs = append(attrs, slog.Int64("unreadable_entries", res.UnreadableEntries))
	}
	if res.LowerBound {
		attrs = append(attrs, slog.Bool("lower_bound", true))
	}
	if res.LimitBytes != nil {
		attrs = append(attrs, slog.Int64("limit_bytes", *res.LimitBytes))
	}
	if err != nil {
		attrs = append(attrs, slog.String("err", err.Error()))
	}
	s.logger.LogAttrs(ctx, level, "alert handled", attrs...)
}

// remediation is what the steps of remediate learn of one firing alert, in their order.
type remediation struct {
	res *AlertResult
	t   Target
	// last and remembered are the ledger's newest entry of the pod UID, if any.
	last       uidEntry
	remembered bool
	pod        *corev1.Pod
	subject    Subject
	limit      int64
	m          Measurement
	// usage says the live measurement as every later message does.
	usage string
	// kubeletSays is the eviction's reason in the kubelet's words.
	kubeletSays string
	// now is the time of the decision to evict, which the ledger records.
	now      time.Time
	slot     *reservation
	leaseEnd time.Time
}

// decide fills the outcome of the alert: the step that calls it ends remediate.
func (r *remediation) decide(o Outcome, reason, format string, args ...any) {
	r.res.Outcome, r.res.Reason, r.res.Message = o, reason, fmt.Sprintf(format, args...)
}

// remediate runs the documented steps for one firing alert and fills res. The returned error is
// the cause of an error or pdb_blocked outcome, for the audit line. Nothing of the alert but
// its target (and whether it asks about a lower bound, which routes) is used: its startsAt,
// like its values, is anyone's to forge. Each step either decides the outcome (done) or leaves
// it to the next; the cheap answers come before the pod, its measurement and an Event.
func (s *Server) remediate(ctx context.Context, res *AlertResult) error {
	r := &remediation{res: res, t: res.Target}
	steps := []func(context.Context, *remediation) (done bool, err error){
		s.declineIncomplete,  // 0. a lower bound the configuration declines
		s.answerFromLedger,   // 1. a pod UID already evicted, or being evicted
		s.declineAtCaps,      //    a namespace or the cluster at its cap
		s.getPod,             //    the pod, fresh from the API server
		s.readLimit,          //    its current limit
		s.applyPodPolicies,   //    the policies that need only the pod
		s.answerStillBlocked, //    an eviction a PodDisruptionBudget still refuses
		s.measure,            // 2. a live measurement
		s.decideOverLimit,    // 3. over the limit?
		s.declineCooldown,    // 4. the cooldown,
		s.reserveSlot,        //    then the caps, on the stored ledger
		s.checkLeadership,    //    only the leader acts
		s.dryRun,             //    or only says what it would do
	}
	for _, step := range steps {
		if done, err := step(ctx, r); done {
			return err
		}
	}
	// 5. Evict through the Eviction API, so PodDisruptionBudgets hold.
	result, err := s.evictPod(ctx, r)
	return s.recordEviction(ctx, r, result, err)
}

// declineIncomplete skips, at no cost, an alert about a lower bound while that policy is off.
func (s *Server) declineIncomplete(_ context.Context, r *remediation) (bool, error) {
	// How long the subject has been a lower bound is the exporter's to say, at decideOverLimit.
	if r.t.Incomplete {
		if reason, why := incompleteDecline(s.cfg); reason != "" {
			r.decide(OutcomeSkipped, reason, "pod %s/%s: %s", r.t.Namespace, r.t.Pod, why)
			return true, nil
		}
	}
	return false, nil
}

// getPod reads the pod from the API server: it may be gone, recreated, terminating or ended.
func (s *Server) getPod(ctx context.Context, r *remediation) (bool, error) {
	t := r.t
	pod, err := s.client.CoreV1().Pods(t.Namespace).Get(ctx, t.Pod, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		r.decide(OutcomeGone, "not_found", "pod %s/%s no longer exists", t.Namespace, t.Pod)
		return true, nil
	case err != nil:
		r.decide(OutcomeError, "api_error", "getting pod %s/%s failed; retry", t.Namespace, t.Pod)
		return true, fmt.Errorf("getting pod %s/%s: %w", t.Namespace, t.Pod, err)
	}
	r.res.Node = pod.Spec.NodeName
	if string(pod.UID) != t.UID {
		r.decide(OutcomeSkipped, SkipRecreated, "pod %s/%s was recreated: uid is now %s, the alert names %s", t.Namespace, t.Pod, pod.UID, t.UID)
		return true, nil
	}
	if pod.DeletionTimestamp != nil {
		r.decide(OutcomeGone, "terminating", "pod %s/%s is already terminating", t.Namespace, t.Pod)
		return true, nil
	}
	// A pod whose containers have all ended (the kubelet evicted it first, or it completed)
	// holds no running volume to enforce, and the exporter measures ended pods no more: asking
	// would answer each of Alertmanager's retries with 503.
	if ended(pod) {
		phase := string(pod.Status.Phase)
		if pod.Status.Reason != "" {
			phase += ", reason " + pod.Status.Reason
		}
		r.decide(OutcomeGone, ReasonEnded, "pod %s/%s has ended (phase %s): nothing left to enforce", t.Namespace, t.Pod, phase)
		return true, nil
	}
	r.pod = pod
	return false, nil
}

// readLimit finds the alert's subject and its limit in the pod's current spec, not the alert's.
func (s *Server) readLimit(_ context.Context, r *remediation) (bool, error) {
	subject := r.t.Subject()
	limit, ok, why := subjectLimit(r.pod, subject)
	if !ok {
		r.decide(OutcomeSkipped, SkipNotOverLimit, "%s in the pod's current spec: nothing to enforce", why)
		return true, nil
	}
	r.res.LimitBytes = &limit
	r.subject, r.limit = subject, limit
	return false, nil
}

// applyPodPolicies decides before the measurement, so an exempt pod costs no walk and no Event.
func (s *Server) applyPodPolicies(ctx context.Context, r *remediation) (bool, error) {
	// Nothing was verified of a pod the remediator may never evict: no Event reports on it.
	nsLabels, err := s.namespaceLabels(ctx, r.pod)
	if err != nil {
		r.decide(OutcomeError, "api_error", "reading namespace %s, which decides whether the pod's exemption holds, failed; retry", r.t.Namespace)
		return true, err
	}
	if reason, msg := podPolicyDecline(s.cfg, r.pod, nsLabels); reason != "" {
		r.decide(OutcomeSkipped, reason, "not evicted: %s", msg)
		return true, nil
	}
	return false, nil
}

// decideOverLimit checks the live measurement against the pod's current limit.
func (s *Server) decideOverLimit(_ context.Context, r *remediation) (bool, error) {
	// A lower bound above the limit proves it; a lower bound at or below the limit proves
	// nothing, unless the exporter says it has been all there is for EvictIncompleteAfter
	// (whatever alert asked: the evidence is the exporter's, and the alert only routes). An
	// alert that asked about a lower bound and finds it too recent is skipped until its next
	// delivery; any other is retried.
	m, usage := r.m, r.usage
	r.kubeletSays = kubeletMessage(r.subject, r.limit)
	if overLimit(m.UsedBytes, r.limit, s.cfg.ThresholdRatio) {
		return false, nil
	}
	long, why := incompleteLongEnough(s.cfg, m)
	switch {
	case !m.LowerBound():
		r.decide(OutcomeSkipped, SkipNotOverLimit, "%s: no longer over the limit", usage)
		return true, nil
	case long:
		r.kubeletSays = incompleteMessage(r.subject, m.MeasuredAt.Sub(m.IncompleteSince), s.cfg.EvictIncompleteAfter)
		return false, nil
	case r.t.Incomplete:
		r.decide(OutcomeSkipped, SkipIncompleteTooRecent, "%s; not evicted: %s", usage, why)
		return true, nil
	default:
		s.metrics.measureErrors.WithLabelValues(MeasureIncomplete).Inc()
		r.decide(OutcomeError, "measurement_"+MeasureIncomplete, "%s: cannot decide whether it is over the limit; nothing done, retry", usage)
		return true, measureErr(MeasureIncomplete, "%s measured a lower bound only: %s", r.subject, m.incompleteWhy())
	}
}

// declineCooldown applies the last policy, the one that needs the ledger's last entry.
func (s *Server) declineCooldown(_ context.Context, r *remediation) (bool, error) {
	r.now = s.now()
	if reason, msg := cooldownDecline(s.cfg, r.pod, r.last, r.remembered, r.now); reason != "" {
		r.decide(OutcomeSkipped, reason, "%s; not evicted: %s", r.usage, msg)
		return true, nil
	}
	return false, nil
}

// ended reports whether the pod's containers have all ended for good.
func ended(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded
}

// namespaceLabels returns the labels of the pod's namespace as far as the policies need them:
// its name label (set by the API server), and its other labels read from the API server only
// when the pod claims an exemption that a selector on them grants.
func (s *Server) namespaceLabels(ctx context.Context, pod *corev1.Pod) (labels.Set, error) {
	set := labels.Set{corev1.LabelMetadataName: pod.Namespace}
	if !claimsExemption(s.cfg, pod) || (namesOnly(s.cfg.OptOutNamespaceSelector) && namesOnly(s.cfg.DaemonSetNamespaceSelector)) {
		return set, nil
	}
	ns, err := s.client.CoreV1().Namespaces().Get(ctx, pod.Namespace, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("getting namespace %s: %w", pod.Namespace, err)
	}
	maps.Copy(set, ns.Labels)
	set[corev1.LabelMetadataName] = pod.Namespace
	return set, nil
}
