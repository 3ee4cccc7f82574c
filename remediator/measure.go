package remediator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Measurement sources.
const (
	SourceExporter = "exporter"
	SourceKubelet  = "kubelet"
)

// Live measurement error reasons: the `reason` label of
// emptydir_remediator_live_measurement_errors_total.
const (
	MeasureStale       = "stale"        // the measurement is older than the allowed age
	MeasureNotFound    = "not_found"    // the source does not know the pod, its UID or the volume
	MeasureUnavailable = "unavailable"  // the source answered that it cannot measure now (5xx, 429)
	MeasureUnreachable = "unreachable"  // the source could not be reached
	MeasureBadResponse = "bad_response" // the source answered something unusable
	MeasureNoExporter  = "no_exporter"  // no ready exporter pod runs on the pod's node
	MeasureWrongNode   = "wrong_node"   // the answer is about another node than the pod's
	// MeasureIncomplete: the walk could not read every entry (or saw directories change, or was
	// cut short) and the lower bound it found is not above the limit, so whether the volume is
	// over its limit cannot be decided.
	MeasureIncomplete = "incomplete"
)

// AllMeasureReasons lists every live measurement error reason.
var AllMeasureReasons = []string{MeasureStale, MeasureNotFound, MeasureUnavailable, MeasureUnreachable, MeasureBadResponse, MeasureNoExporter, MeasureWrongNode, MeasureIncomplete}

// Subject is what of a pod a live measurement is about: one emptyDir volume (Volume), the
// pod's ephemeral storage, or one container's (Container), by Check.
type Subject struct {
	Check     string
	Volume    string
	Container string
}

// String names the subject in messages.
func (s Subject) String() string {
	switch s.Check {
	case CheckPod:
		return "the pod's ephemeral storage"
	case CheckContainer:
		return fmt.Sprintf("the ephemeral storage of container %q", s.Container)
	default:
		return fmt.Sprintf("emptyDir volume %q", s.Volume)
	}
}

// Measurement is a live measurement of one Subject.
type Measurement struct {
	Source string
	// Node is the node the source says it measured on.
	Node      string
	Subject   Subject
	UsedBytes int64
	// UnreadableEntries counts entries the walk could not read: when it is not 0, UsedBytes
	// is a lower bound.
	UnreadableEntries int64
	// ChangedDirectories counts directories the walk did not see as they were when it started, and
	// CutShort says it hit its deadline or its CPU budget (liveapi.Volume): either makes
	// UsedBytes a lower bound.
	ChangedDirectories int64
	CutShort           bool
	// Unlocated is why a writable layer counted in UsedBytes could not be located (as 0).
	Unlocated string
	// Incomplete says UsedBytes is a lower bound, for any reason (Measurement.LowerBound).
	Incomplete bool
	// IncompleteSince is, for a lower bound, since when the source says the subject has been
	// measurable only as one without a break (the exporter's record of its walks,
	// liveapi.Volume.IncompleteSince); zero when it does not say. The only evidence
	// Config.EvictIncompleteAfter decides on.
	IncompleteSince time.Time
	// MeasuredAt is when the measured value was complete: the end of the exporter's walk
	// (its completedAt), or the kubelet's stats time. Freshness is judged on it, so a long
	// honest walk of a big volume is as fresh as a short one when it ends.
	MeasuredAt time.Time
}

// LowerBound reports whether UsedBytes is only a lower bound, which proves a volume over its
// limit when above it and proves nothing otherwise.
func (m Measurement) LowerBound() bool {
	return m.Incomplete || m.UnreadableEntries > 0 || m.ChangedDirectories > 0 || m.CutShort
}

// incompleteWhy says why UsedBytes is a lower bound, for messages.
func (m Measurement) incompleteWhy() string {
	var why []string
	if m.UnreadableEntries > 0 {
		why = append(why, fmt.Sprintf("%d entries unreadable", m.UnreadableEntries))
	}
	if m.ChangedDirectories > 0 {
		why = append(why, fmt.Sprintf("%d directories changed during the walk", m.ChangedDirectories))
	}
	if m.CutShort {
		why = append(why, "walk cut short by its deadline or CPU budget")
	}
	if len(why) == 0 && m.Unlocated != "" {
		why = append(why, "writable layer not located: "+m.Unlocated)
	}
	if len(why) == 0 {
		why = append(why, "a lower bound, the source says")
	}
	return strings.Join(why, ", ")
}

// LiveMeasurer measures one subject of a pod at request time. Implementations must
// check the pod's UID, return a *MeasurementError for anything but a measurement of that
// pod instance, and say when the value was measured: the caller judges whether it is fresh
// enough to act on (checkMeasurement), once, for every source.
type LiveMeasurer interface {
	Measure(ctx context.Context, pod *corev1.Pod, subject Subject) (Measurement, error)
}

// MeasurementError is a failed live measurement. Every failure is worth a retry: the volume
// is measured again on the next delivery.
type MeasurementError struct {
	Reason string
	Err    error
}

func (e *MeasurementError) Error() string {
	return fmt.Sprintf("live measurement %s: %v", e.Reason, e.Err)
}
func (e *MeasurementError) Unwrap() error { return e.Err }

func measureErr(reason string, format string, args ...any) error {
	return &MeasurementError{Reason: reason, Err: fmt.Errorf(format, args...)}
}

// measurementReason returns the reason of a measurement error, MeasureBadResponse when the
// error is of another kind.
func measurementReason(err error) string {
	var me *MeasurementError
	if errors.As(err, &me) {
		return me.Reason
	}
	return MeasureBadResponse
}

// checkMeasurement checks what every source's answer must satisfy before it is acted on:
// it is about the pod's own node and fresh.
func checkMeasurement(m Measurement, pod *corev1.Pod, now time.Time, maxAge time.Duration) error {
	if m.Node != pod.Spec.NodeName {
		return measureErr(MeasureWrongNode, "%s answered for node %q, the pod runs on node %q", m.Source, m.Node, pod.Spec.NodeName)
	}
	return checkFresh(m.MeasuredAt, now, maxAge)
}

// checkFresh rejects a measurement taken more than maxAge before now. A zero measuredAt is
// rejected too: a measurement without a time cannot be shown to be fresh. Clocks of
// different hosts differ a little, so a time up to maxAge in the future is accepted.
func checkFresh(measuredAt, now time.Time, maxAge time.Duration) error {
	if measuredAt.IsZero() {
		return measureErr(MeasureBadResponse, "measurement has no time")
	}
	age := now.Sub(measuredAt)
	if age > maxAge {
		return measureErr(MeasureStale, "measured at %s, %s ago, more than the allowed %s", measuredAt.UTC().Format(time.RFC3339Nano), age.Round(time.Millisecond), maxAge)
	}
	if -age > maxAge {
		return measureErr(MeasureBadResponse, "measured at %s, %s in the future: clocks disagree", measuredAt.UTC().Format(time.RFC3339Nano), (-age).Round(time.Millisecond))
	}
	return nil
}

// measure takes a live measurement: never the alert's numbers, never a stale value.
func (s *Server) measure(ctx context.Context, r *remediation) (bool, error) {
	m, err := s.liveMeasurement(ctx, r.pod, r.subject)
	if err != nil {
		reason := measurementReason(err)
		s.metrics.measureErrors.WithLabelValues(reason).Inc()
		r.decide(OutcomeError, "measurement_"+reason, "live measurement of %s failed (%s); nothing done, retry", r.subject, reason)
		return true, fmt.Errorf("measuring %s of pod %s/%s: %w", r.subject, r.t.Namespace, r.t.Pod, err)
	}
	r.m = m
	r.usage = s.recordUsage(r.res, r.subject, m, r.limit)
	return false, nil
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
