package remediator

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"
)

const (
	uid1 = "5cf142d1-7a2d-4698-a7e0-f6ebfc0d4b7d"
	uid2 = "9d1b8a3e-1111-4c4c-8888-0123456789ab"
	mib  = 1 << 20
)

func TestWebhookAlertOutcomes(t *testing.T) {
	tests := []struct {
		name       string
		cfg        func(*Config)
		pod        *corev1.Pod // nil: no pod
		alert      Alert
		used       int64 // live measurement; -1: measurer fails
		measureErr error
		evictErr   error
		wantCode   int
		wantOut    Outcome
		wantReason string
		wantEvicts int
		wantGone   bool   // pod deleted afterwards
		wantEvent  string // reason of the one event expected, "" for none
	}{
		{name: "over the limit: evicted", pod: newPod("default", "web-0", uid1).build(), alert: firing("default", "web-0", uid1), used: 10 * mib,
			wantCode: 200, wantOut: OutcomeEvicted, wantEvicts: 1, wantGone: true, wantEvent: EventEvicted},
		{name: "pod gone", alert: firing("default", "web-0", uid1), used: 10 * mib,
			wantCode: 200, wantOut: OutcomeGone, wantReason: "not_found"},
		{name: "pod recreated under the same name", pod: newPod("default", "web-0", uid2).build(), alert: firing("default", "web-0", uid1), used: 10 * mib,
			wantCode: 200, wantOut: OutcomeSkipped, wantReason: SkipRecreated},
		{name: "pod terminating", pod: newPod("default", "web-0", uid1).terminating().build(), alert: firing("default", "web-0", uid1), used: 10 * mib,
			wantCode: 200, wantOut: OutcomeGone, wantReason: "terminating"},
		{name: "live measurement under the limit", pod: newPod("default", "web-0", uid1).build(), alert: firing("default", "web-0", uid1), used: mib,
			wantCode: 200, wantOut: OutcomeSkipped, wantReason: SkipNotOverLimit},
		{name: "limit raised since the alert", pod: newPod("default", "web-0", uid1).limit("20Mi").build(), alert: firing("default", "web-0", uid1), used: 10 * mib,
			wantCode: 200, wantOut: OutcomeSkipped, wantReason: SkipNotOverLimit},
		{name: "limit removed since the alert", pod: newPod("default", "web-0", uid1).noLimit().build(), alert: firing("default", "web-0", uid1), used: 10 * mib,
			wantCode: 200, wantOut: OutcomeSkipped, wantReason: SkipNotOverLimit},
		{name: "threshold ratio 2 tolerates 1.5x", cfg: func(c *Config) { c.ThresholdRatio = 2 }, pod: newPod("default", "web-0", uid1).build(), alert: firing("default", "web-0", uid1), used: 3 * mib / 2,
			wantCode: 200, wantOut: OutcomeSkipped, wantReason: SkipNotOverLimit},
		{name: "live measurement unavailable: retry", pod: newPod("default", "web-0", uid1).build(), alert: firing("default", "web-0", uid1), measureErr: measureErr(MeasureUnavailable, "exporter busy"),
			wantCode: 503, wantOut: OutcomeError, wantReason: "measurement_unavailable"},
		{name: "stale measurement: retry, no eviction", pod: newPod("default", "web-0", uid1).build(), alert: firing("default", "web-0", uid1), measureErr: measureErr(MeasureStale, "too old"),
			wantCode: 503, wantOut: OutcomeError, wantReason: "measurement_stale"},
		{name: "dry run", cfg: func(c *Config) { c.DryRun = true }, pod: newPod("default", "web-0", uid1).build(), alert: firing("default", "web-0", uid1), used: 10 * mib,
			wantCode: 200, wantOut: OutcomeDryRun, wantEvent: EventOverLimit},
		{name: "namespace denied", cfg: func(c *Config) { c.NamespaceDeny = []string{"default"} }, pod: newPod("default", "web-0", uid1).build(), alert: firing("default", "web-0", uid1), used: 10 * mib,
			wantCode: 200, wantOut: OutcomeSkipped, wantReason: SkipNamespace},
		{name: "selector does not match", cfg: func(c *Config) { c.PodSelector = labels.SelectorFromSet(labels.Set{"tier": "batch"}) }, pod: newPod("default", "web-0", uid1).build(), alert: firing("default", "web-0", uid1), used: 10 * mib,
			wantCode: 200, wantOut: OutcomeSkipped, wantReason: SkipSelector},
		{name: "opted out", pod: newPod("kube-system", "web-0", uid1).annotate(DefaultOptOutAnnotation, "false").build(), alert: firing("kube-system", "web-0", uid1), used: 10 * mib,
			wantCode: 200, wantOut: OutcomeSkipped, wantReason: SkipOptOut},
		{name: "mirror pod", pod: newPod("kube-system", "etcd-node-1", uid1).annotate("kubernetes.io/config.mirror", "abc").build(), alert: firing("kube-system", "etcd-node-1", uid1), used: 10 * mib,
			wantCode: 200, wantOut: OutcomeSkipped, wantReason: SkipMirrorPod},
		{name: "daemonset pod", pod: newPod("kube-system", "ds-abcde", uid1).ownedBy("apps/v1", "DaemonSet").build(), alert: firing("kube-system", "ds-abcde", uid1), used: 10 * mib,
			wantCode: 200, wantOut: OutcomeSkipped, wantReason: SkipDaemonSet},
		{name: "daemonset pod allowed", cfg: func(c *Config) { c.AllowDaemonSetPods = true }, pod: newPod("kube-system", "ds-abcde", uid1).ownedBy("apps/v1", "DaemonSet").build(), alert: firing("kube-system", "ds-abcde", uid1), used: 10 * mib,
			wantCode: 200, wantOut: OutcomeEvicted, wantEvicts: 1, wantGone: true, wantEvent: EventEvicted},
		{name: "critical pod", pod: newPod("default", "web-0", uid1).priorityClass(SystemClusterCritical).build(), alert: firing("default", "web-0", uid1), used: 10 * mib,
			wantCode: 200, wantOut: OutcomeSkipped, wantReason: SkipCritical},
		{name: "PDB blocks: 429 naming the DisruptionBudget, retry", pod: newPod("default", "web-0", uid1).build(), alert: firing("default", "web-0", uid1), used: 10 * mib, evictErr: pdbRefusal(),
			wantCode: 503, wantOut: OutcomePDBBlocked, wantReason: "pdb", wantEvicts: 1, wantEvent: EventEvictionBlocked},
		{name: "API Priority and Fairness throttles: 429 without a cause, retry", pod: newPod("default", "web-0", uid1).build(), alert: firing("default", "web-0", uid1), used: 10 * mib, evictErr: apfThrottle(),
			wantCode: 503, wantOut: OutcomeThrottled, wantReason: "throttled", wantEvicts: 1},
		{name: "eviction 404: gone", pod: newPod("default", "web-0", uid1).build(), alert: firing("default", "web-0", uid1), used: 10 * mib, evictErr: apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "web-0"),
			wantCode: 200, wantOut: OutcomeGone, wantReason: "not_found", wantEvicts: 1},
		{name: "eviction API error: retry", pod: newPod("default", "web-0", uid1).build(), alert: firing("default", "web-0", uid1), used: 10 * mib, evictErr: apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "web-0", errors.New("denied by a webhook")),
			wantCode: 503, wantOut: OutcomeError, wantReason: "eviction_failed", wantEvicts: 1, wantEvent: EventEvictionFailed},
		{name: "eviction answer lost (500 from etcd): retry, may have happened", pod: newPod("default", "web-0", uid1).build(), alert: firing("default", "web-0", uid1), used: 10 * mib, evictErr: apierrors.NewInternalError(errors.New("etcd leader changed")),
			wantCode: 503, wantOut: OutcomeError, wantReason: "eviction_unconfirmed", wantEvicts: 1, wantEvent: EventEvictionFailed},
		{name: "resolved alert acknowledged", pod: newPod("default", "web-0", uid1).build(), alert: resolved(firing("default", "web-0", uid1)), used: 10 * mib,
			wantCode: 200, wantOut: OutcomeResolved},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig()
			if tt.cfg != nil {
				tt.cfg(&cfg)
			}
			var pods []*corev1.Pod
			if tt.pod != nil {
				pods = append(pods, tt.pod)
			}
			e := newEnv(t, cfg, pods...)
			if tt.pod != nil {
				e.measurer.used[string(tt.pod.UID)] = tt.used
			}
			e.measurer.err = tt.measureErr
			if tt.evictErr != nil {
				e.injectEvictionError(tt.evictErr)
			}
			code, resp := e.post(payloadJSON(t, tt.alert))
			if code != tt.wantCode {
				t.Errorf("code = %d, want %d (%+v)", code, tt.wantCode, resp)
			}
			if len(resp.Alerts) != 1 {
				t.Fatalf("got %d alert results, want 1: %+v", len(resp.Alerts), resp)
			}
			got := resp.Alerts[0]
			if got.Outcome != tt.wantOut || got.Reason != tt.wantReason {
				t.Errorf("outcome/reason = %s/%q, want %s/%q (message %q)", got.Outcome, got.Reason, tt.wantOut, tt.wantReason, got.Message)
			}
			if got.Message == "" {
				t.Error("result has no message")
			}
			if n := e.evictions(); n != tt.wantEvicts {
				t.Errorf("eviction calls = %d, want %d", n, tt.wantEvicts)
			}
			if tt.pod != nil {
				_, err := e.client.CoreV1().Pods(tt.pod.Namespace).Get(t.Context(), tt.pod.Name, metav1.GetOptions{})
				if gone := apierrors.IsNotFound(err); gone != tt.wantGone {
					t.Errorf("pod gone = %v, want %v", gone, tt.wantGone)
				}
			}
			events := e.events()
			switch {
			case tt.wantEvent == "" && len(events) > 0:
				t.Errorf("unexpected events %q", events)
			case tt.wantEvent != "":
				if len(events) != 1 || !strings.Contains(events[0], " "+tt.wantEvent+" ") {
					t.Errorf("events = %q, want one %s", events, tt.wantEvent)
				} else if !strings.Contains(events[0], `"empty"`) || !strings.Contains(events[0], "Mi") {
					t.Errorf("event %q does not name the volume and sizes", events[0])
				}
			}
		})
	}
}

// The policies that need only the pod decide before the live measurement: a pod the
// remediator may never evict costs no walk on its node and gets no Event; the reason is the
// same as when they were applied after measuring.
func TestPodPolicyDecidesBeforeMeasuring(t *testing.T) {
	tests := []struct {
		name         string
		cfg          func(*Config)
		pod          *corev1.Pod
		wantReason   string
		wantMeasures int
	}{
		{"allowed pod: measured", nil, newPod("default", "web-0", uid1).build(), "", 1},
		{"namespace denied", func(c *Config) { c.NamespaceDeny = []string{"default"} }, newPod("default", "web-0", uid1).build(), SkipNamespace, 0},
		{"namespace not allowed", func(c *Config) { c.NamespaceAllow = []string{"other"} }, newPod("default", "web-0", uid1).build(), SkipNamespace, 0},
		{"selector does not match", func(c *Config) { c.PodSelector = labels.SelectorFromSet(labels.Set{"tier": "batch"}) }, newPod("default", "web-0", uid1).build(), SkipSelector, 0},
		{"opted out", nil, newPod("kube-system", "web-0", uid1).annotate(DefaultOptOutAnnotation, "false").build(), SkipOptOut, 0},
		{"mirror pod", nil, newPod("default", "web-0", uid1).annotate(corev1.MirrorPodAnnotationKey, "abc").build(), SkipMirrorPod, 0},
		{"daemonset pod", nil, newPod("kube-system", "web-0", uid1).ownedBy("apps/v1", "DaemonSet").build(), SkipDaemonSet, 0},
		{"critical pod", nil, newPod("default", "web-0", uid1).priorityClass(SystemNodeCritical).build(), SkipCritical, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig()
			if tt.cfg != nil {
				tt.cfg(&cfg)
			}
			e := newEnv(t, cfg, tt.pod)
			e.measurer.used[uid1] = 10 * mib
			_, resp := e.post(payloadJSON(t, firing(tt.pod.Namespace, tt.pod.Name, uid1)))
			if len(resp.Alerts) != 1 {
				t.Fatalf("got %d alert results, want 1: %+v", len(resp.Alerts), resp)
			}
			if got := resp.Alerts[0]; got.Reason != tt.wantReason {
				t.Errorf("reason %q (%s: %s), want %q", got.Reason, got.Outcome, got.Message, tt.wantReason)
			}
			if e.measurer.calls != tt.wantMeasures {
				t.Errorf("%d live measurements, want %d", e.measurer.calls, tt.wantMeasures)
			}
			if events := e.events(); tt.wantReason != "" && len(events) > 0 {
				t.Errorf("events %q for a pod the remediator never evicts", events)
			}
		})
	}
}

// A pod whose containers have ended (the kubelet evicted it first and left it Failed, or it
// completed) is gone for the remediator: answered 200 without a live measurement, which the
// exporter refuses for ended pods, so Alertmanager's retries stop (issue 30, item 10).
func TestEndedPodIsGone(t *testing.T) {
	tests := []struct {
		name   string
		phase  corev1.PodPhase
		reason string
	}{
		{"evicted by the kubelet", corev1.PodFailed, "Evicted"},
		{"failed", corev1.PodFailed, ""},
		{"completed", corev1.PodSucceeded, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, testConfig(), newPod("default", "web-0", uid1).ended(tt.phase, tt.reason).build())
			// No measurement for uid1: the fake answers not_found, as the exporter does for a
			// pod it no longer lists.
			for delivery := range 2 {
				code, resp := e.post(payloadJSON(t, firing("default", "web-0", uid1)))
				if code != http.StatusOK || len(resp.Alerts) != 1 {
					t.Fatalf("delivery %d: code %d %+v, want 200 and one result", delivery+1, code, resp)
				}
				if got := resp.Alerts[0]; got.Outcome != OutcomeGone || got.Reason != ReasonEnded || !strings.Contains(got.Message, string(tt.phase)) {
					t.Errorf("delivery %d: %s/%q (%s), want %s/%q naming phase %s", delivery+1, got.Outcome, got.Reason, got.Message, OutcomeGone, ReasonEnded, tt.phase)
				}
			}
			if e.measurer.calls != 0 {
				t.Errorf("%d live measurements of an ended pod, want 0", e.measurer.calls)
			}
			if n := e.evictions(); n != 0 {
				t.Errorf("%d eviction calls, want 0", n)
			}
			if got := testutil.ToFloat64(e.srv.metrics.alerts.WithLabelValues(string(OutcomeGone))); got != 2 {
				t.Errorf("alerts_total{outcome=\"gone\"} = %g, want 2", got)
			}
			if events := e.events(); len(events) > 0 {
				t.Errorf("events %q for an ended pod", events)
			}
		})
	}
}

func TestEvictionRequest(t *testing.T) {
	cfg := testConfig()
	cfg.GracePeriodSeconds = 7
	e := newEnv(t, cfg, newPod("default", "web-0", uid1).build())
	e.measurer.used[uid1] = 10 * mib
	if code, resp := e.post(payloadJSON(t, firing("default", "web-0", uid1))); code != http.StatusOK {
		t.Fatalf("code %d: %+v", code, resp)
	}
	ev := lastEviction(t, e)
	if ev.DeleteOptions == nil || ev.DeleteOptions.Preconditions == nil || ev.DeleteOptions.Preconditions.UID == nil || string(*ev.DeleteOptions.Preconditions.UID) != uid1 {
		t.Errorf("eviction lacks the UID precondition: %+v", ev.DeleteOptions)
	}
	if g := ev.DeleteOptions.GracePeriodSeconds; g == nil || *g != 7 {
		t.Errorf("grace period = %v, want 7", g)
	}
	if r := ev.Annotations[EvictionReasonAnnotation]; !strings.Contains(r, `"empty"`) || !strings.Contains(r, "uses 10Mi") || !strings.Contains(r, "limit 1Mi") {
		t.Errorf("reason annotation = %q", r)
	}
}

// A pod recreated between the GET and the eviction is protected by the UID precondition.
func TestEvictionUIDPreconditionProtectsRecreatedPod(t *testing.T) {
	e := newEnv(t, testConfig(), newPod("default", "web-0", uid1).build())
	e.measurer.used[uid1] = 10 * mib
	// Recreate the pod (new UID) when the Eviction API is called, before the simulator runs.
	recreated := false
	e.client.PrependReactor("create", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() == "eviction" && !recreated {
			recreated = true
			gvr := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
			if err := e.client.Tracker().Update(gvr, newPod("default", "web-0", uid2).build(), "default"); err != nil {
				t.Error(err)
			}
		}
		return false, nil, nil
	})
	code, resp := e.post(payloadJSON(t, firing("default", "web-0", uid1)))
	if code != http.StatusServiceUnavailable || resp.Alerts[0].Outcome != OutcomeError {
		t.Fatalf("code %d, result %+v: want 503 error (409 conflict)", code, resp.Alerts)
	}
	pod, err := e.client.CoreV1().Pods("default").Get(t.Context(), "web-0", metav1.GetOptions{})
	if err != nil || string(pod.UID) != uid2 {
		t.Fatalf("recreated pod was evicted: %v %v", pod, err)
	}
	// Alertmanager retries: now the GET sees the new UID and the alert is skipped.
	code, resp = e.post(payloadJSON(t, firing("default", "web-0", uid1)))
	if code != http.StatusOK || resp.Alerts[0].Reason != SkipRecreated {
		t.Fatalf("retry: code %d, result %+v, want skip recreated", code, resp.Alerts)
	}
}

func TestWebhookManyAlertsHandledOnTheirOwn(t *testing.T) {
	e := newEnv(t, testConfig(),
		newPod("default", "a", uid1).build(),
		newPod("default", "b", uid2).build())
	e.measurer.used[uid1] = 10 * mib
	e.measurer.used[uid2] = 10
	code, resp := e.post(payloadJSON(t,
		firing("default", "a", uid1),
		firing("default", "b", uid2),
		resolved(firing("default", "c", testUID("old"))),
		firing("default", "gone", testUID("x")),
	))
	if code != http.StatusOK {
		t.Fatalf("code %d", code)
	}
	want := []Outcome{OutcomeEvicted, OutcomeSkipped, OutcomeResolved, OutcomeGone}
	for i, w := range want {
		if resp.Alerts[i].Outcome != w || resp.Alerts[i].Index != i {
			t.Errorf("alert %d: %+v, want %s", i, resp.Alerts[i], w)
		}
	}
}

func TestWebhookRejectsBadPayloads(t *testing.T) {
	tests := []struct {
		name     string
		body     string
		wantCode int
		wantErr  string
	}{
		{"not JSON", `{"version": "4", `, http.StatusBadRequest, "invalid JSON"},
		{"wrong version", `{"version": "3", "alerts": []}`, http.StatusBadRequest, "unsupported payload version"},
		{"missing labels", `{"version": "4", "alerts": [{"status": "firing", "labels": {"namespace": "default", "pod": "web-0"}}]}`, http.StatusUnprocessableEntity, "malformed alerts"},
		{"namespace not a DNS label", badLabel(t, LabelNamespace, "Default"), http.StatusUnprocessableEntity, "label namespace=\"Default\" is not a valid name"},
		{"namespace path traversal", badLabel(t, LabelNamespace, "../kube-system"), http.StatusUnprocessableEntity, "label namespace="},
		{"pod not a DNS subdomain", badLabel(t, LabelPod, "web_0"), http.StatusUnprocessableEntity, "label pod=\"web_0\" is not a valid name"},
		{"pod with a slash", badLabel(t, LabelPod, "web-0/eviction"), http.StatusUnprocessableEntity, "label pod="},
		{"volume not a DNS label", badLabel(t, LabelVolume, "data.cache"), http.StatusUnprocessableEntity, "label volume=\"data.cache\" is not a valid name"},
		{"uid not a UUID", badLabel(t, LabelUID, "uid-1"), http.StatusUnprocessableEntity, "label uid=\"uid-1\" is not a valid UID"},
		{"uid in upper case", badLabel(t, LabelUID, strings.ToUpper(uid1)), http.StatusUnprocessableEntity, "not a valid UID"},
		{"uid with a query", badLabel(t, LabelUID, uid1+"&volume=x"), http.StatusUnprocessableEntity, "not a valid UID"},
		{"too large", `{"version": "4", "receiver": "` + strings.Repeat("x", 4096) + `"}`, http.StatusRequestEntityTooLarge, "larger than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.MaxRequestBytes = 2048
			e := newEnv(t, cfg, newPod("default", "web-0", uid1).build())
			e.measurer.used[uid1] = 10 * mib
			code, resp := e.post([]byte(tt.body))
			reason := resp.Error
			for _, p := range resp.Problems {
				reason += "; " + p.Error
			}
			if code != tt.wantCode || !strings.Contains(reason, tt.wantErr) {
				t.Errorf("code %d reason %q, want %d containing %q", code, reason, tt.wantCode, tt.wantErr)
			}
			if n := len(e.client.Actions()); n != 0 || e.measurer.calls != 0 {
				t.Errorf("a bad payload made %d API calls and %d measurements", n, e.measurer.calls)
			}
		})
	}
}

// badLabel is a payload with one firing alert for web-0 whose label is set to value.
func badLabel(t *testing.T, label, value string) string {
	a := firing("default", "web-0", uid1)
	a.Labels[label] = value
	return string(payloadJSON(t, a))
}

// A payload with one malformed firing alert changes nothing, not even for its valid alerts.
func TestMalformedAlertRejectsWholePayload(t *testing.T) {
	e := newEnv(t, testConfig(), newPod("default", "web-0", uid1).build())
	e.measurer.used[uid1] = 10 * mib
	bad := firing("default", "web-1", uid2)
	delete(bad.Labels, LabelVolume)
	code, resp := e.post(payloadJSON(t, firing("default", "web-0", uid1), bad))
	if code != http.StatusUnprocessableEntity || len(resp.Problems) != 1 || resp.Problems[0].Index != 1 || !strings.Contains(resp.Problems[0].Error, "volume") {
		t.Fatalf("code %d, %+v", code, resp)
	}
	if e.evictions() != 0 || e.measurer.calls != 0 {
		t.Fatal("a rejected payload acted")
	}
}

func TestBearerAuth(t *testing.T) {
	tests := []struct {
		name     string
		header   []string
		wantCode int
	}{
		{"no header", nil, http.StatusUnauthorized},
		{"wrong token", []string{"Authorization", "Bearer nope"}, http.StatusUnauthorized},
		{"token prefix", []string{"Authorization", "Bearer s3cre"}, http.StatusUnauthorized},
		{"basic instead", []string{"Authorization", "Basic czNjcmV0Cg=="}, http.StatusUnauthorized},
		{"right token", []string{"Authorization", "Bearer s3cret"}, http.StatusOK},
		{"scheme case-insensitive", []string{"Authorization", "bearer s3cret"}, http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.BearerToken = "s3cret"
			e := newEnv(t, cfg, newPod("default", "web-0", uid1).build())
			e.measurer.used[uid1] = 10 * mib
			code, _ := e.post(payloadJSON(t, firing("default", "web-0", uid1)), tt.header...)
			if code != tt.wantCode {
				t.Fatalf("code %d, want %d", code, tt.wantCode)
			}
			wantEvictions := 0
			if code == http.StatusOK {
				wantEvictions = 1
			}
			if n := e.evictions(); n != wantEvictions {
				t.Errorf("evictions %d, want %d", n, wantEvictions)
			}
			if code == http.StatusUnauthorized && (len(e.client.Actions()) != 0 || e.measurer.calls != 0) {
				t.Errorf("unauthenticated request reached the API server (%d actions) or the measurer", len(e.client.Actions()))
			}
		})
	}
}

// A delivery of a pod UID the ledger already answers (evicted here, or being evicted by
// another replica) costs no API request: not even the pod GET.
func TestDuplicateDeliveriesCostNoPodGet(t *testing.T) {
	tests := []struct {
		name     string
		cooldown time.Duration
		prior    func(t *testing.T, e *env) // what happened to uid1 before the duplicates
	}{
		{"evicted by this replica", 10 * time.Minute, func(t *testing.T, e *env) {
			if _, resp := e.post(payloadJSON(t, firing("default", "web-0", uid1))); resp.Alerts[0].Outcome != OutcomeEvicted {
				t.Fatalf("first delivery: %+v, want evicted", resp.Alerts[0])
			}
		}},
		// Without a cooldown, so that only the reservation can make the delivery a duplicate.
		{"being evicted by another replica", 0, func(t *testing.T, e *env) {
			if _, reason, why, err := e.srv.ledger.reserve(t.Context(), uid1, "node-1", "default", e.clock(), e.srv.cfg.Caps); err != nil || reason != "" {
				t.Fatalf("reserving a slot as the other replica: %v %s %s", err, reason, why)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.Cooldown = tt.cooldown
			e := newEnv(t, cfg, newPod("default", "web-0", uid1).build())
			e.measurer.used[uid1] = 10 * mib
			// Keep the pod after the eviction (a slow graceful termination).
			e.client.PrependReactor("create", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
				return action.GetSubresource() == "eviction", nil, nil
			})
			var gets atomic.Int32
			e.client.PrependReactor("get", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
				gets.Add(1)
				return false, nil, nil
			})
			tt.prior(t, e)
			before := gets.Load()
			const deliveries = 5
			for range deliveries {
				if _, resp := e.post(payloadJSON(t, firing("default", "web-0", uid1))); resp.Alerts[0].Reason != SkipDuplicate {
					t.Errorf("duplicate delivery: %+v, want skipped/%s", resp.Alerts[0], SkipDuplicate)
				}
			}
			if n := gets.Load() - before; n != 0 {
				t.Errorf("%d pod GETs for %d duplicate deliveries, want 0", n, deliveries)
			}
			if n := e.evictions(); n > 1 {
				t.Errorf("%d eviction calls, want at most the first", n)
			}
		})
	}
}

// Duplicates arrive concurrently (HA Alertmanagers, retries): at most one eviction.
func TestConcurrentDuplicateDeliveriesEvictOnce(t *testing.T) {
	e := newEnv(t, testConfig(), newPod("default", "web-0", uid1).build())
	e.measurer.used[uid1] = 10 * mib
	// Keep the pod after the eviction (a slow graceful termination) so that every delivery
	// sees it: only the remediator's own memory prevents the second eviction.
	e.client.PrependReactor("create", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() == "eviction" {
			return true, nil, nil
		}
		return false, nil, nil
	})
	body := payloadJSON(t, firing("default", "web-0", uid1), firing("default", "web-0", uid1))
	const deliveries = 16
	var wg sync.WaitGroup
	outcomes := make(chan Outcome, 2*deliveries)
	for range deliveries {
		wg.Go(func() {
			code, resp := e.post(body)
			if code != http.StatusOK {
				t.Errorf("code %d: %+v", code, resp)
			}
			for _, a := range resp.Alerts {
				outcomes <- a.Outcome
			}
		})
	}
	wg.Wait()
	close(outcomes)
	counts := map[Outcome]int{}
	for o := range outcomes {
		counts[o]++
	}
	if n := e.evictions(); n != 1 {
		t.Fatalf("%d eviction calls for %d duplicate deliveries, want 1", n, 2*deliveries)
	}
	if counts[OutcomeEvicted] != 1 || counts[OutcomeSkipped] != 2*deliveries-1 {
		t.Errorf("outcomes %v", counts)
	}
	// And the same after the clock moved on but within the cooldown.
	e.advance(5 * time.Minute)
	if _, resp := e.post(body); resp.Alerts[0].Reason != SkipDuplicate {
		t.Errorf("repeat within cooldown: %+v", resp.Alerts[0])
	}
}

func TestCooldownAfterDryRun(t *testing.T) {
	cfg := testConfig()
	cfg.DryRun = true
	cfg.Cooldown = 10 * time.Minute
	e := newEnv(t, cfg, newPod("default", "web-0", uid1).build())
	e.measurer.used[uid1] = 10 * mib
	steps := []struct {
		after   time.Duration
		want    Outcome
		wantWhy string
	}{
		{0, OutcomeDryRun, ""},
		{time.Minute, OutcomeSkipped, SkipCooldown},
		{9 * time.Minute, OutcomeDryRun, ""},
	}
	for i, s := range steps {
		e.advance(s.after)
		_, resp := e.post(payloadJSON(t, firing("default", "web-0", uid1)))
		if got := resp.Alerts[0]; got.Outcome != s.want || got.Reason != s.wantWhy {
			t.Errorf("step %d: %s/%s, want %s/%s", i, got.Outcome, got.Reason, s.want, s.wantWhy)
		}
	}
	if e.evictions() != 0 {
		t.Error("dry run called the Eviction API")
	}
}

func TestCaps(t *testing.T) {
	cfg := testConfig()
	cfg.Caps = Caps{PerNode: 2, PerNamespace: 3, Global: 4, Window: time.Hour}
	var pods []*corev1.Pod
	var alerts []Alert
	type podSpec struct{ ns, name, node string }
	specs := []podSpec{
		{"a", "p1", "n1"}, {"a", "p2", "n1"}, {"a", "p3", "n1"}, // third on n1: cap_node
		{"a", "p4", "n2"}, {"a", "p5", "n2"}, // p5: a has 3: cap_namespace
		{"b", "p6", "n3"}, {"b", "p7", "n3"}, // p6 is the 4th: ok; p7: cap_global
	}
	for i, s := range specs {
		uid := testUID(s.name)
		pods = append(pods, newPod(s.ns, s.name, uid).node(s.node).build())
		alerts = append(alerts, firing(s.ns, s.name, uid))
		_ = i
	}
	e := newEnv(t, cfg, pods...)
	for _, p := range pods {
		e.measurer.used[string(p.UID)] = 10 * mib
	}
	_, resp := e.post(payloadJSON(t, alerts...))
	want := []string{"", "", SkipCapNode, "", SkipCapNamespace, "", SkipCapGlobal}
	for i, w := range want {
		if got := resp.Alerts[i]; got.Reason != w {
			t.Errorf("%s: %s/%q, want reason %q", specs[i].name, got.Outcome, got.Reason, w)
		}
	}
	if n := e.evictions(); n != 4 {
		t.Errorf("%d evictions, want 4", n)
	}
	// A blocked eviction does not use up a slot; the window slides.
	e.advance(time.Hour)
	_, resp = e.post(payloadJSON(t, firing("a", "p3", testUID("p3"))))
	if resp.Alerts[0].Outcome != OutcomeEvicted {
		t.Errorf("after the window: %+v", resp.Alerts[0])
	}
}

func TestNonLeaderAnswers503(t *testing.T) {
	cfg := testConfig()
	cfg.LeaderElection = true
	e := newEnv(t, cfg, newPod("default", "web-0", uid1).build())
	e.measurer.used[uid1] = 10 * mib
	readyz := func() int {
		rec := httptest.NewRecorder()
		e.handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		return rec.Code
	}
	if c := readyz(); c != http.StatusServiceUnavailable {
		t.Errorf("readyz before the election = %d", c)
	}
	e.srv.setLeader(false)
	if c := readyz(); c != http.StatusOK {
		t.Errorf("readyz as standby = %d", c)
	}
	if code, _ := e.post(payloadJSON(t, firing("default", "web-0", uid1))); code != http.StatusServiceUnavailable {
		t.Errorf("standby answered %d, want 503", code)
	}
	if e.evictions() != 0 {
		t.Error("standby evicted")
	}
	leadNow(e.srv)
	if code, _ := e.post(payloadJSON(t, firing("default", "web-0", uid1))); code != http.StatusOK || e.evictions() != 1 {
		t.Errorf("leader answered %d with %d evictions", code, e.evictions())
	}
}

func TestRoutes(t *testing.T) {
	e := newEnv(t, testConfig())
	tests := []struct {
		method, path string
		want         int
	}{
		{http.MethodGet, "/healthz", 200},
		{http.MethodGet, "/readyz", 200},
		{http.MethodGet, "/metrics", 200},
		{http.MethodGet, "/webhook", 405},
		{http.MethodPost, "/nope", 404},
	}
	for _, tt := range tests {
		rec := httptest.NewRecorder()
		e.handler.ServeHTTP(rec, httptest.NewRequest(tt.method, tt.path, nil))
		if rec.Code != tt.want {
			t.Errorf("%s %s = %d, want %d", tt.method, tt.path, rec.Code, tt.want)
		}
	}
}

func lastEviction(t *testing.T, e *env) *policyv1.Eviction {
	t.Helper()
	var ev *policyv1.Eviction
	for _, a := range e.client.Actions() {
		if a.GetSubresource() == "eviction" {
			ev = a.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction)
		}
	}
	if ev == nil {
		t.Fatal("no eviction")
	}
	return ev
}
