package remediator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// handleAlert handles one alert of a payload: it never returns an error, it reports.
func (s *Server) handleAlert(ctx context.Context, idx int, a Alert) AlertResult {
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
	s.audit(ctx, a, res, err)
	return res
}

// audit writes the one structured log line per alert.
func (s *Server) audit(ctx context.Context, a Alert, res AlertResult, err error) {
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

// remediate runs the documented steps for one firing alert and fills res. The returned error is
// the cause of an error or pdb_blocked outcome, for the audit line. Nothing of the alert but
// its target (and whether it asks about a lower bound, which routes) is used: its startsAt,
// like its values, is anyone's to forge.
func (s *Server) remediate(ctx context.Context, res *AlertResult) error {
	t := res.Target
	set := func(o Outcome, reason, format string, args ...any) {
		res.Outcome, res.Reason, res.Message = o, reason, fmt.Sprintf(format, args...)
	}

	// 0. An alert that says its subject has been measurable only as a lower bound is decided by
	// the configuration first: off by default, it costs no request at all. How long it has been
	// one is the exporter's to say, at step 3.
	if t.Incomplete {
		if reason, why := incompleteDecline(s.cfg); reason != "" {
			set(OutcomeSkipped, reason, "pod %s/%s: %s", t.Namespace, t.Pod, why)
			return nil
		}
	}

	// 1. What the ledger already knows of the alert's pod UID (a read of the watch cache): a
	// delivery of a pod already evicted, or being evicted by another replica, is answered
	// without an API request, so bursts of duplicates do not queue in the client's rate limit.
	// A dry-run entry (cooldown) is left to the checks below, which name their own reasons.
	last, remembered, err := s.ledger.last(ctx, t.UID)
	if err != nil {
		set(OutcomeError, "ledger_error", "reading the eviction ledger failed; nothing done, retry")
		return err
	}
	if remembered && last.Outcome != OutcomeDryRun {
		if reason, why := s.ledger.declines(t.UID, last, s.now()); reason != "" {
			set(OutcomeSkipped, reason, "pod %s/%s: %s", t.Namespace, t.Pod, why)
			return nil
		}
	}

	// A namespace or the cluster at its cap: the answer is known without the pod, its
	// measurement or an Event, so a fleet-wide storm beyond the caps costs no API request per
	// delivery. Nothing was verified, so nothing is recorded on the pod. A UID the ledger
	// holds may hold a slot of its own (an unconfirmed attempt): reserve decides for it.
	if !remembered {
		reason, why, err := s.ledger.capsReached(ctx, t.Namespace, s.now(), s.cfg.Caps)
		if err != nil {
			set(OutcomeError, "ledger_error", "reading the eviction ledger failed; nothing done, retry")
			return err
		}
		if reason != "" {
			set(OutcomeSkipped, reason, "pod %s/%s not checked: %s", t.Namespace, t.Pod, why)
			return nil
		}
	}

	// The pod, fresh from the API server, and its UID.
	pod, err := s.client.CoreV1().Pods(t.Namespace).Get(ctx, t.Pod, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		set(OutcomeGone, "not_found", "pod %s/%s no longer exists", t.Namespace, t.Pod)
		return nil
	case err != nil:
		set(OutcomeError, "api_error", "getting pod %s/%s failed; retry", t.Namespace, t.Pod)
		return fmt.Errorf("getting pod %s/%s: %w", t.Namespace, t.Pod, err)
	}
	res.Node = pod.Spec.NodeName
	if string(pod.UID) != t.UID {
		set(OutcomeSkipped, SkipRecreated, "pod %s/%s was recreated: uid is now %s, the alert names %s", t.Namespace, t.Pod, pod.UID, t.UID)
		return nil
	}
	if pod.DeletionTimestamp != nil {
		set(OutcomeGone, "terminating", "pod %s/%s is already terminating", t.Namespace, t.Pod)
		return nil
	}
	// A pod whose containers have all ended (the kubelet evicted it first, or it completed)
	// holds no running volume to enforce, and the exporter measures ended pods no more: asking
	// would answer each of Alertmanager's retries with 503.
	if ended(pod) {
		phase := string(pod.Status.Phase)
		if pod.Status.Reason != "" {
			phase += ", reason " + pod.Status.Reason
		}
		set(OutcomeGone, ReasonEnded, "pod %s/%s has ended (phase %s): nothing left to enforce", t.Namespace, t.Pod, phase)
		return nil
	}
	subject := t.Subject()
	limit, ok, why := subjectLimit(pod, subject)
	if !ok {
		set(OutcomeSkipped, SkipNotOverLimit, "%s in the pod's current spec: nothing to enforce", why)
		return nil
	}
	res.LimitBytes = &limit
	// The policies that need only the pod decide before the measurement: a pod the
	// remediator may never evict costs no walk on its node, and gets no Event (nothing was
	// verified to report).
	nsLabels, err := s.namespaceLabels(ctx, pod)
	if err != nil {
		set(OutcomeError, "api_error", "reading namespace %s, which decides whether the pod's exemption holds, failed; retry", t.Namespace)
		return err
	}
	if reason, msg := podPolicyDecline(s.cfg, pod, nsLabels); reason != "" {
		set(OutcomeSkipped, reason, "not evicted: %s", msg)
		return nil
	}

	// A pod whose eviction a PodDisruptionBudget refused lately, over its limit then: while a
	// dry-run eviction is still refused, the retry is answered from that measurement instead
	// of walking the volume again, which spent the node's live budget on each of
	// Alertmanager's retries. Nothing is done on it: once the budget lets go, or after
	// blockedReuseMaxAge, the pod is measured anew.
	if m, ok := s.blocked.get(t.UID, subject, s.now()); ok && overLimit(m.UsedBytes, limit, s.cfg.ThresholdRatio) {
		result, err := s.evict(ctx, pod, types.UID(t.UID), kubeletMessage(subject, limit), true)
		if result == EvictionPDBBlocked {
			s.metrics.evictions.WithLabelValues(result).Inc()
			s.metrics.measureReused.Inc()
			usage := s.recordUsage(res, subject, m, limit)
			set(OutcomePDBBlocked, "pdb", "%s; eviction still blocked by a PodDisruptionBudget (dry run), retry later", usage)
			s.recorder.Eventf(pod, nil, corev1.EventTypeWarning, EventEvictionBlocked, ActionEvict, "%s; eviction blocked: %s", usage, errorText(err))
			return err
		}
		s.blocked.forget(t.UID, subject)
	}

	// 2. A live measurement: never the alert's numbers, never a stale value.
	m, err := s.liveMeasurement(ctx, pod, subject)
	if err != nil {
		reason := measurementReason(err)
		s.metrics.measureErrors.WithLabelValues(reason).Inc()
		set(OutcomeError, "measurement_"+reason, "live measurement of %s failed (%s); nothing done, retry", subject, reason)
		return fmt.Errorf("measuring %s of pod %s/%s: %w", subject, t.Namespace, t.Pod, err)
	}
	used := m.UsedBytes
	usage := s.recordUsage(res, subject, m, limit)

	// 3. Over the pod's current limit? A lower bound above the limit proves it; a lower bound
	// at or below the limit proves nothing, unless the exporter says it has been all there is
	// for EvictIncompleteAfter (whatever alert asked: the evidence is the exporter's, and the
	// alert only routes). An alert that asked about a lower bound and finds it too recent is
	// skipped until its next delivery; any other is retried.
	kubeletSays := kubeletMessage(subject, limit)
	if !overLimit(used, limit, s.cfg.ThresholdRatio) {
		long, why := incompleteLongEnough(s.cfg, m)
		switch {
		case !m.LowerBound():
			set(OutcomeSkipped, SkipNotOverLimit, "%s: no longer over the limit", usage)
			return nil
		case long:
			kubeletSays = incompleteMessage(subject, m.MeasuredAt.Sub(m.IncompleteSince), s.cfg.EvictIncompleteAfter)
		case t.Incomplete:
			set(OutcomeSkipped, SkipIncompleteTooRecent, "%s; not evicted: %s", usage, why)
			return nil
		default:
			s.metrics.measureErrors.WithLabelValues(MeasureIncomplete).Inc()
			set(OutcomeError, "measurement_"+MeasureIncomplete, "%s: cannot decide whether it is over the limit; nothing done, retry", usage)
			return measureErr(MeasureIncomplete, "%s measured a lower bound only: %s", subject, m.incompleteWhy())
		}
	}

	// 4. The cooldown (the pod's own policies decided above), then the caps.
	now := s.now()
	if reason, msg := cooldownDecline(s.cfg, pod, last, remembered, now); reason != "" {
		set(OutcomeSkipped, reason, "%s; not evicted: %s", usage, msg)
		return nil
	}
	// The stored ledger decides: another replica may have acted since last was read.
	slot, reason, why, err := s.ledger.reserve(ctx, t.UID, pod.Spec.NodeName, pod.Namespace, now, s.cfg.Caps)
	if err != nil {
		set(OutcomeError, "ledger_error", "%s; reserving an eviction slot in the ledger failed; nothing done, retry", usage)
		return err
	}
	if reason != "" {
		set(OutcomeSkipped, reason, "%s; not evicted: %s", usage, why)
		if reason != SkipCooldown && reason != SkipDuplicate {
			s.recorder.Eventf(pod, nil, corev1.EventTypeWarning, EventOverLimit, ActionCheck, "%s; not evicted: %s", usage, why)
		}
		return nil
	}

	// Leadership may have moved while this payload was worked through (measurements take
	// long): only the leader acts, so ask again right before acting, against the time of
	// the last Lease renewal, not only the elector's flag.
	leaseEnd, leading := s.leadership(time.Now())
	if !leading {
		s.releaseSlot(ctx, slot)
		set(OutcomeNotLeader, "not_leader", "%s; not evicted: this replica is no longer the leader, retry", usage)
		return nil
	}
	if s.cfg.DryRun {
		s.commitSlot(ctx, slot, OutcomeDryRun, now)
		s.metrics.evictions.WithLabelValues(EvictionDryRun).Inc()
		set(OutcomeDryRun, "", "%s; dry run: would evict", usage)
		s.recorder.Eventf(pod, nil, corev1.EventTypeWarning, EventOverLimit, ActionCheck, "%s; dry run: would evict", usage)
		return nil
	}

	// 5. Evict through the Eviction API, so PodDisruptionBudgets hold.
	// An Eviction request still waiting (in the client's rate limiter, for a connection)
	// when the Lease may have passed to another replica is never sent.
	evictCtx := ctx
	if !leaseEnd.IsZero() {
		var cancel context.CancelFunc
		evictCtx, cancel = context.WithDeadline(ctx, leaseEnd)
		defer cancel()
	}
	// The kubelet's own words first: an eviction reads the same whoever made it.
	result, err := s.evict(evictCtx, pod, types.UID(t.UID), kubeletSays+" "+usage, false)
	s.metrics.evictions.WithLabelValues(result).Inc()
	switch result {
	case EvictionEvicted:
		s.commitSlot(ctx, slot, OutcomeEvicted, now)
		set(OutcomeEvicted, "", "%s; evicted", usage)
		s.recorder.Eventf(pod, nil, corev1.EventTypeWarning, EventEvicted, ActionEvict, "Evicted: %s %s", kubeletSays, usage)
		return nil
	case EvictionNotFound:
		s.releaseSlot(ctx, slot)
		set(OutcomeGone, "not_found", "pod %s/%s disappeared before the eviction", t.Namespace, t.Pod)
		return nil
	case EvictionPDBBlocked:
		s.releaseSlot(ctx, slot)
		s.blocked.put(t.UID, subject, m, s.now())
		set(OutcomePDBBlocked, "pdb", "%s; eviction blocked by a PodDisruptionBudget, retry later", usage)
		s.recorder.Eventf(pod, nil, corev1.EventTypeWarning, EventEvictionBlocked, ActionEvict, "%s; eviction blocked: %s", usage, errorText(err))
		return err
	case EvictionThrottled:
		// The API server protecting itself says nothing about the pod: no Event on it.
		s.releaseSlot(ctx, slot)
		set(OutcomeThrottled, "throttled", "%s; eviction throttled by the API server (%s), retry later", usage, errorText(err))
		return err
	case EvictionUnconfirmed:
		// The eviction may have happened: giving the slot back could let one more pod
		// through the caps. The retry sees the pod gone, or tries again in this slot.
		s.commitSlot(ctx, slot, outcomeUnconfirmed, now)
		set(OutcomeError, "eviction_unconfirmed", "%s; the Eviction API's answer was lost (%s): the pod may be evicted, its cap slot stays held; retry", usage, errorText(err))
		s.recorder.Eventf(pod, nil, corev1.EventTypeWarning, EventEvictionFailed, ActionEvict, "%s; eviction not confirmed: %s", usage, errorText(err))
		return err
	default:
		s.releaseSlot(ctx, slot)
		set(OutcomeError, "eviction_failed", "%s; eviction failed: %s", usage, errorText(err))
		s.recorder.Eventf(pod, nil, corev1.EventTypeWarning, EventEvictionFailed, ActionEvict, "%s; eviction failed: %s", usage, errorText(err))
		return err
	}
}

// ended reports whether the pod's containers have all ended for good.
func ended(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded
}

// blockedReuseMaxAge bounds how long after its walk the over-limit measurement of a pod whose
// eviction a PodDisruptionBudget refused answers the retries while a dry-run eviction is still
// refused: Alertmanager retries about ten times a minute, each a walk otherwise.
const blockedReuseMaxAge = time.Minute

// recordUsage puts measurement m of subject into res and returns the usage as messages say it.
func (s *Server) recordUsage(res *AlertResult, subject Subject, m Measurement, limit int64) string {
	used := m.UsedBytes
	res.UsedBytes, res.Source, res.UnreadableEntries, res.LowerBound = &used, m.Source, m.UnreadableEntries, m.LowerBound()
	usage := fmt.Sprintf("%s uses %s (measured %s by %s), limit %s", subject, quantity(used),
		m.MeasuredAt.UTC().Format(time.RFC3339), m.Source, quantity(limit))
	if m.LowerBound() {
		usage = fmt.Sprintf("%s uses at least %s (%s; measured %s by %s), limit %s", subject,
			quantity(used), m.incompleteWhy(), m.MeasuredAt.UTC().Format(time.RFC3339), m.Source, quantity(limit))
	}
	if s.cfg.ThresholdRatio != 1 {
		usage += fmt.Sprintf(" × threshold ratio %g", s.cfg.ThresholdRatio)
	}
	return usage
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

// liveMeasurement returns a fresh measurement of the subject of pod: the last one of the same
// pod UID and subject while it is still fresh, else a new one from the measurer. Every
// measurement is checked (the pod's node, freshness) before it is used or kept.
func (s *Server) liveMeasurement(ctx context.Context, pod *corev1.Pod, subject Subject) (Measurement, error) {
	if m, ok := s.measurements.get(string(pod.UID), subject, s.now()); ok {
		s.metrics.measureReused.Inc()
		return m, nil
	}
	start := time.Now()
	m, err := s.measurer.Measure(ctx, pod, subject)
	s.metrics.measureDuration.Observe(time.Since(start).Seconds())
	if err != nil {
		return Measurement{}, err
	}
	now := s.now()
	if err := checkMeasurement(m, pod, now, s.cfg.MaxMeasurementAge); err != nil {
		return Measurement{}, err
	}
	s.measurements.put(string(pod.UID), subject, m, now)
	return m, nil
}

// commitSlot records an eviction in the ledger. On failure the slot stays reserved, which
// counts against the caps and the cooldown all the same.
func (s *Server) commitSlot(ctx context.Context, slot *reservation, outcome Outcome, at time.Time) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ledgerWriteTimeout)
	defer cancel()
	if err := slot.commit(ctx, outcome, at); err != nil {
		s.logger.Warn("eviction ledger not updated; the slot stays reserved", "err", err)
	}
}

// releaseSlot gives a slot back after no eviction happened. On failure the slot stays held
// until the cap window ends: fewer evictions, never more.
func (s *Server) releaseSlot(ctx context.Context, slot *reservation) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ledgerWriteTimeout)
	defer cancel()
	if err := slot.release(ctx); err != nil {
		s.logger.Warn("eviction slot not released; it stays held until the cap window ends", "err", err)
	}
}

// ledgerWriteTimeout bounds recording the result of an eviction that already happened, even
// when the alert's own time ran out.
const ledgerWriteTimeout = 10 * time.Second

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
