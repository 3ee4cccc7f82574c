package remediator

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// PayloadVersion is the only Alertmanager webhook payload version the remediator accepts.
const PayloadVersion = "4"

// Alert label names every firing alert must carry.
const (
	LabelNamespace = "namespace"
	LabelPod       = "pod"
	LabelUID       = "uid"
	LabelVolume    = "volume"
	// LabelCheck says which of the kubelet's local-storage limits the alert is about
	// (CheckEmptyDir, CheckPod, CheckContainer); an alert without it is about an emptyDir.
	LabelCheck = "check"
	// LabelContainer names the container of a CheckContainer alert.
	LabelContainer = "container"
	// LabelRemediation says what the alert asks for: RemediationEvictIncomplete, or (any
	// other value, or none) an eviction of what is over its limit.
	LabelRemediation = "remediation"
	// LabelPodNamespace, when an alert has it, is the namespace of the pod the alert names, and
	// label namespace is not: the chart's routing copies of the triggers carry the remediator's
	// own namespace there, the one an AlertmanagerConfig under the Prometheus Operator's default
	// matcher strategy (OnNamespace) routes.
	LabelPodNamespace = "pod_namespace"
)

// RemediationEvictIncomplete marks an alert saying that its subject has been measurable only as a
// lower bound for as long as the alert has fired (EmptyDirMeasurementIncomplete): acted on only
// with Config.EvictIncompleteAfter.
const RemediationEvictIncomplete = "evict_incomplete"

// The limits an alert can be about, as label check spells them: the kubelet's three
// local-storage checks (localStorageEviction in pkg/kubelet/eviction/eviction_manager.go).
const (
	// CheckEmptyDir: an emptyDir volume over its sizeLimit (label volume).
	CheckEmptyDir = "emptydir"
	// CheckPod: the pod's ephemeral storage over the pod's ephemeral-storage limit.
	CheckPod = "pod"
	// CheckContainer: a container's ephemeral storage over its own limit (label container).
	CheckContainer = "container"
)

// Alert statuses used by Alertmanager.
const (
	StatusFiring   = "firing"
	StatusResolved = "resolved"
)

// Payload is the Alertmanager webhook payload, version 4.
type Payload struct {
	Version           string            `json:"version"`
	GroupKey          string            `json:"groupKey"`
	TruncatedAlerts   int               `json:"truncatedAlerts"`
	Status            string            `json:"status"`
	Receiver          string            `json:"receiver"`
	GroupLabels       map[string]string `json:"groupLabels"`
	CommonLabels      map[string]string `json:"commonLabels"`
	CommonAnnotations map[string]string `json:"commonAnnotations"`
	ExternalURL       string            `json:"externalURL"`
	Alerts            []Alert           `json:"alerts"`
}

// Alert is one alert of a webhook payload.
type Alert struct {
	Status       string            `json:"status"`
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt"`
	GeneratorURL string            `json:"generatorURL"`
	Fingerprint  string            `json:"fingerprint"`
}

// Target is what a firing alert names: one pod instance and what of it is over its limit.
type Target struct {
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	UID       string `json:"uid"`
	// Check is CheckEmptyDir, CheckPod or CheckContainer.
	Check     string `json:"check"`
	Volume    string `json:"volume,omitempty"`
	Container string `json:"container,omitempty"`
	// Incomplete says the alert is RemediationEvictIncomplete: the subject has been measurable
	// only as a lower bound, not (necessarily) over its limit.
	Incomplete bool `json:"incomplete,omitempty"`
}

// Target returns the pod and limit the alert names. Call it on validated alerts only.
func (a Alert) Target() Target {
	t := Target{
		Namespace:  a.Labels[namespaceLabel(a.Labels)],
		Pod:        a.Labels[LabelPod],
		UID:        a.Labels[LabelUID],
		Check:      checkOf(a.Labels),
		Incomplete: a.Labels[LabelRemediation] == RemediationEvictIncomplete,
	}
	switch t.Check {
	case CheckEmptyDir:
		t.Volume = a.Labels[LabelVolume]
	case CheckContainer:
		t.Container = a.Labels[LabelContainer]
	}
	return t
}

// Subject is what of the pod the alert says is over its limit.
func (t Target) Subject() Subject {
	return Subject{Check: t.Check, Volume: t.Volume, Container: t.Container}
}

// namespaceLabel is the label that holds the namespace of the pod an alert names:
// LabelPodNamespace where the alert has it, else LabelNamespace.
func namespaceLabel(l map[string]string) string {
	if _, ok := l[LabelPodNamespace]; ok {
		return LabelPodNamespace
	}
	return LabelNamespace
}

// checkOf is the check an alert's labels name: CheckEmptyDir without the check label.
func checkOf(l map[string]string) string {
	if c, ok := l[LabelCheck]; ok {
		return c
	}
	return CheckEmptyDir
}

// PayloadError is a webhook payload that cannot be handled; Code is the HTTP status to answer.
type PayloadError struct {
	Code    int
	Message string
	// Alerts lists, per alert index, what is wrong with individual alerts (422 only).
	Alerts []AlertProblem
}

// AlertProblem names a malformed alert of a payload.
type AlertProblem struct {
	Index       int    `json:"index"`
	Fingerprint string `json:"fingerprint,omitempty"`
	Error       string `json:"error"`
}

func (e *PayloadError) Error() string {
	if len(e.Alerts) == 0 {
		return e.Message
	}
	parts := make([]string, 0, len(e.Alerts))
	for _, p := range e.Alerts {
		parts = append(parts, fmt.Sprintf("alert %d: %s", p.Index, p.Error))
	}
	return e.Message + ": " + strings.Join(parts, "; ")
}

// Limits on label values, far above what Kubernetes allows, so a hostile payload stays small.
const maxLabelValueLen = 1024

// DecodePayload reads at most maxBytes from r and decodes a version 4 Alertmanager webhook
// payload. It validates every alert: status firing or resolved, and firing alerts must carry
// non-empty namespace (pod_namespace where set), pod and uid labels, and the volume label (check emptydir, the
// default) or the container label (check container). Errors are *PayloadError with the HTTP
// status to answer: 413 for a body over maxBytes, 400 for unreadable JSON or another
// version, 422 for malformed alerts.
func DecodePayload(r io.Reader, maxBytes int64) (*Payload, error) {
	body, err := io.ReadAll(io.LimitReader(r, maxBytes+1))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, &PayloadError{Code: http.StatusRequestEntityTooLarge, Message: fmt.Sprintf("request body larger than %d bytes", maxBytes)}
		}
		return nil, &PayloadError{Code: http.StatusBadRequest, Message: fmt.Sprintf("reading request body: %v", err)}
	}
	if int64(len(body)) > maxBytes {
		return nil, &PayloadError{Code: http.StatusRequestEntityTooLarge, Message: fmt.Sprintf("request body larger than %d bytes", maxBytes)}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	var p Payload
	if err := dec.Decode(&p); err != nil {
		return nil, &PayloadError{Code: http.StatusBadRequest, Message: fmt.Sprintf("invalid JSON: %v", err)}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, &PayloadError{Code: http.StatusBadRequest, Message: "invalid JSON: data after the payload object"}
	}
	if p.Version != PayloadVersion {
		return nil, &PayloadError{Code: http.StatusBadRequest, Message: fmt.Sprintf("unsupported payload version %q, want %q: Alertmanager's own webhook body (a webhook `payload` template must not be set on the remediator's route)", p.Version, PayloadVersion)}
	}
	var problems []AlertProblem
	for i, a := range p.Alerts {
		if err := validateAlert(a); err != nil {
			problems = append(problems, AlertProblem{Index: i, Fingerprint: a.Fingerprint, Error: err.Error()})
		}
	}
	if len(problems) > 0 {
		return nil, &PayloadError{Code: http.StatusUnprocessableEntity, Message: "malformed alerts, nothing was done", Alerts: problems}
	}
	return &p, nil
}

// labelCheck is what validating one label of an alert found wrong.
type labelCheck struct {
	label string
	errs  []string
}

func validateAlert(a Alert) error {
	switch a.Status {
	case StatusResolved:
		return nil
	case StatusFiring:
	default:
		return fmt.Errorf("status %q is neither %q nor %q", a.Status, StatusFiring, StatusResolved)
	}
	check := checkOf(a.Labels)
	nsLabel := namespaceLabel(a.Labels)
	required := []string{nsLabel, LabelPod, LabelUID}
	switch check {
	case CheckEmptyDir:
		required = append(required, LabelVolume)
	case CheckContainer:
		required = append(required, LabelContainer)
	case CheckPod:
	default:
		return fmt.Errorf("label check=%q is none of %q, %q and %q", check, CheckEmptyDir, CheckPod, CheckContainer)
	}
	var missing []string
	for _, l := range required {
		v := a.Labels[l]
		if strings.TrimSpace(v) == "" {
			missing = append(missing, l)
			continue
		}
		if len(v) > maxLabelValueLen {
			return fmt.Errorf("label %q is longer than %d bytes", l, maxLabelValueLen)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("firing alert lacks label(s) %s", strings.Join(missing, ", "))
	}
	checks := []labelCheck{
		{nsLabel, validation.IsDNS1123Label(a.Labels[nsLabel])},
		{LabelPod, validation.IsDNS1123Subdomain(a.Labels[LabelPod])},
	}
	switch check {
	case CheckEmptyDir:
		checks = append(checks, labelCheck{LabelVolume, validation.IsDNS1123Label(a.Labels[LabelVolume])})
	case CheckContainer:
		checks = append(checks, labelCheck{LabelContainer, validation.IsDNS1123Label(a.Labels[LabelContainer])})
	}
	for _, c := range checks {
		if len(c.errs) > 0 {
			return fmt.Errorf("label %s=%q is not a valid name: %s", c.label, a.Labels[c.label], strings.Join(c.errs, "; "))
		}
	}
	if !isUID(a.Labels[LabelUID]) {
		return fmt.Errorf("label uid=%q is not a valid UID: the API server's pod UIDs are lowercase RFC 4122 UUIDs (8-4-4-4-12 hex digits)", a.Labels[LabelUID])
	}
	return nil
}

// isUID reports whether s has the form of the UIDs the API server gives objects: a
// lowercase RFC 4122 UUID.
func isUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, c := range s {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
				return false
			}
		}
	}
	return true
}
