package remediator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	"github.com/emptydir-guard/emptydir-guard/internal/liveapi"
)

// liveBody is the exporter's live answer for pod default/empty-test1 on node-1: a memory
// volume "cache" and the disk volume "empty" using used bytes, both measured at measuredAt.
func liveBody(uid string, measuredAt time.Time, used int64) liveapi.Response {
	limit, one := int64(1<<20), int64(1)
	return liveapi.Response{Node: "node-1", Namespace: "default", Pod: "empty-test1", UID: uid,
		Source: "filesystem", MeasuredAt: measuredAt, Volumes: []liveapi.Volume{
			{Name: "cache", Medium: "memory", UsedBytes: &one, LimitBytes: &limit, CapacityBytes: 100,
				InodesUsed: 1, MeasuredAt: measuredAt, CompletedAt: measuredAt},
			{Name: "empty", Medium: "disk", UsedBytes: &used, LimitBytes: &limit, CapacityBytes: 270014464000,
				InodesUsed: 2, MeasuredAt: measuredAt, CompletedAt: measuredAt},
		}}
}

// withoutUsedBytes leaves usedBytes out of every volume of r.
func withoutUsedBytes(r liveapi.Response) liveapi.Response {
	r.Volumes = slices.Clone(r.Volumes)
	for i := range r.Volumes {
		r.Volumes[i].UsedBytes = nil
	}
	return r
}

func encodeJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// measureAndJudge is the remediation step's use of a measurer: measure, then judge the
// answer (the pod's node, freshness against maxAge) as Server.liveMeasurement does.
func measureAndJudge(ctx context.Context, m LiveMeasurer, pod *corev1.Pod, volume string, maxAge time.Duration) (Measurement, error) {
	got, err := m.Measure(ctx, pod, Subject{Check: CheckEmptyDir, Volume: volume})
	if err != nil {
		return Measurement{}, err
	}
	if err := checkMeasurement(got, pod, time.Now(), maxAge); err != nil {
		return Measurement{}, err
	}
	return got, nil
}

func TestExporterMeasurer(t *testing.T) {
	pod := newPod("default", "empty-test1", uid1).build()
	now := time.Now()
	tests := []struct {
		name       string
		status     int
		body       any // encoded as JSON; a string is sent as it is
		volume     string
		wantUsed   int64
		wantReason string
	}{
		{name: "fresh", status: 200, body: liveBody(uid1, now.Add(-100*time.Millisecond), 10244096), volume: "empty", wantUsed: 10244096},
		{name: "stale", status: 200, body: liveBody(uid1, now.Add(-time.Minute), 10244096), volume: "empty", wantReason: MeasureStale},
		{name: "future", status: 200, body: liveBody(uid1, now.Add(time.Hour), 10244096), volume: "empty", wantReason: MeasureBadResponse},
		{name: "other uid answered", status: 200, body: liveBody(uid2, now, 10244096), volume: "empty", wantReason: MeasureBadResponse},
		{name: "volume missing in answer", status: 200, body: liveBody(uid1, now, 10244096), volume: "data", wantReason: MeasureNotFound},
		{name: "unknown pod", status: 404, body: liveapi.Error{Error: "pod default/empty-test1 is not on node node-1"}, volume: "empty", wantReason: MeasureNotFound},
		{name: "cannot measure", status: 503, body: liveapi.Error{Error: "permission denied"}, volume: "empty", wantReason: MeasureUnavailable},
		{name: "exporter busy with this caller", status: 429, body: liveapi.Error{Error: "one live measurement per caller at a time"}, volume: "empty", wantReason: MeasureUnavailable},
		{name: "bad request", status: 400, body: liveapi.Error{Error: "uid is required"}, volume: "empty", wantReason: MeasureBadResponse},
		{name: "malformed JSON", status: 200, body: `{"node": "node-1", "volumes": [`, volume: "empty", wantReason: MeasureBadResponse},
		{name: "no usedBytes", status: 200, body: withoutUsedBytes(liveBody(uid1, now, 5)), volume: "empty", wantReason: MeasureBadResponse},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body, raw := tt.body.(string)
			if !raw {
				body = string(encodeJSON(t, tt.body))
			}
			var gotURL string
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				gotURL = r.URL.String()
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tt.status)
				_, _ = w.Write([]byte(body))
			}))
			defer ts.Close()
			m := NewExporterMeasurer(ts.Client(), StaticLocator(ts.URL+"/"))
			got, err := measureAndJudge(t.Context(), m, pod, tt.volume, 5*time.Second)
			wantURL := "/live/namespaces/default/pods/empty-test1?uid=" + uid1 + "&volume=" + tt.volume
			if gotURL != wantURL {
				t.Errorf("requested %q, want %q", gotURL, wantURL)
			}
			assertMeasurement(t, got, err, tt.wantUsed, tt.wantReason)
			if err == nil && (got.Source != SourceExporter || got.MeasuredAt.IsZero() || got.Node != "node-1") {
				t.Errorf("measurement %+v", got)
			}
		})
	}
}

func TestExporterMeasurerUnreachable(t *testing.T) {
	ts := httptest.NewServer(http.NotFoundHandler())
	url := ts.URL
	ts.Close()
	m := NewExporterMeasurer(ts.Client(), StaticLocator(url))
	_, err := m.Measure(t.Context(), newPod("default", "p", uid1).build(), Subject{Check: CheckEmptyDir, Volume: "empty"})
	assertMeasurement(t, Measurement{}, err, 0, MeasureUnreachable)
}

func assertMeasurement(t *testing.T, got Measurement, err error, wantUsed int64, wantReason string) {
	t.Helper()
	if wantReason == "" {
		if err != nil {
			t.Fatalf("unexpected error %v", err)
		}
		if got.UsedBytes != wantUsed {
			t.Errorf("usedBytes %d, want %d", got.UsedBytes, wantUsed)
		}
		return
	}
	var me *MeasurementError
	if !errors.As(err, &me) {
		t.Fatalf("error %v is not a *MeasurementError", err)
	}
	if me.Reason != wantReason {
		t.Errorf("reason %q (%v), want %q", me.Reason, err, wantReason)
	}
}

func TestPodLocator(t *testing.T) {
	exporter := func(name, node, ip string, phase corev1.PodPhase, ready corev1.ConditionStatus) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "monitoring", Name: name, Labels: map[string]string{"app.kubernetes.io/name": "emptydir-exporter"}},
			Spec:       corev1.PodSpec{NodeName: node},
			Status: corev1.PodStatus{Phase: phase, PodIP: ip,
				Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}}},
		}
	}
	client := fake.NewClientset(
		exporter("exp-a", "node-1", "10.0.0.1", corev1.PodRunning, corev1.ConditionTrue),
		exporter("exp-b", "node-2", "10.0.0.2", corev1.PodRunning, corev1.ConditionFalse),
		exporter("exp-c", "node-3", "", corev1.PodPending, corev1.ConditionFalse),
		exporter("exp-d", "node-4", "fd00::4", corev1.PodRunning, corev1.ConditionTrue),
	)
	loc := PodLocator{Client: client, Namespace: "monitoring", Selector: "app.kubernetes.io/name=emptydir-exporter", Scheme: "https", Port: 9809}
	tests := []struct {
		node, want, wantReason string
	}{
		{"node-1", "https://10.0.0.1:9809", ""},
		{"node-2", "", MeasureNoExporter}, // not ready
		{"node-3", "", MeasureNoExporter}, // pending
		{"node-4", "https://[fd00::4]:9809", ""},
		{"node-9", "", MeasureNoExporter},
	}
	for _, tt := range tests {
		got, err := loc.Locate(context.Background(), tt.node)
		if tt.wantReason != "" {
			assertMeasurement(t, Measurement{}, err, 0, tt.wantReason)
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("Locate(%s) = %q, %v; want %q", tt.node, got, err, tt.want)
		}
	}
	// The field selector on spec.nodeName is sent to the API server.
	for _, a := range client.Actions() {
		if a.GetVerb() != "list" {
			continue
		}
		fs := a.(interface{ GetListRestrictions() k8stestingRestrictions }).GetListRestrictions().Fields.String()
		if !strings.HasPrefix(fs, "spec.nodeName=node-") {
			t.Errorf("list without the node field selector: %q", fs)
		}
	}
}

// summaryJSON is a kubelet /stats/summary answer, trimmed to what matters, with the shape the
// kubelet serves.
func summaryJSON(uid string, at time.Time, used int64) string {
	ts := at.Format(time.RFC3339)
	return fmt.Sprintf(`{
 "node": {"nodeName": "node-1", "startTime": "2026-12-01T00:00:00Z",
          "fs": {"time": %q, "availableBytes": 1000, "capacityBytes": 2000, "usedBytes": 1000}},
 "pods": [
  {"podRef": {"name": "other", "namespace": "default", "uid": "u-other"}, "startTime": "2026-12-02T16:00:00Z",
   "containers": [], "volume": [{"time": %q, "usedBytes": 99, "name": "empty"}]},
  {"podRef": {"name": "empty-test1", "namespace": "default", "uid": %q},
   "startTime": "2026-12-02T16:00:00Z",
   "containers": [{"name": "test2", "startTime": "2026-12-02T16:00:01Z",
     "cpu": {"time": %q, "usageNanoCores": 0, "usageCoreNanoSeconds": 1000}}],
   "volume": [
     {"time": %q, "availableBytes": 1000, "capacityBytes": 2000, "usedBytes": 4096, "inodesFree": 10, "inodes": 20, "inodesUsed": 1, "name": "kube-api-access-abcde"},
     {"time": %q, "availableBytes": 1000, "capacityBytes": 2000, "usedBytes": %d, "inodesFree": 10, "inodes": 20, "inodesUsed": 2, "name": "empty"}
   ],
   "ephemeral-storage": {"time": %q, "usedBytes": 10260480}}
 ]
}`, ts, ts, uid, ts, ts, ts, used, ts)
}

func TestKubeletMeasurer(t *testing.T) {
	pod := newPod("default", "empty-test1", uid1).build()
	now := time.Now()
	tests := []struct {
		name       string
		status     int
		body       string
		maxAge     time.Duration
		volume     string
		wantUsed   int64
		wantReason string
	}{
		{name: "fresh", status: 200, body: summaryJSON(uid1, now, 10244096), maxAge: 5 * time.Second, volume: "empty", wantUsed: 10244096},
		{name: "stale as the kubelet's 1m aggregation", status: 200, body: summaryJSON(uid1, now.Add(-70*time.Second), 10244096), maxAge: 5 * time.Second, volume: "empty", wantReason: MeasureStale},
		{name: "stale accepted with a larger bound", status: 200, body: summaryJSON(uid1, now.Add(-70*time.Second), 10244096), maxAge: 3 * time.Minute, volume: "empty", wantUsed: 10244096},
		{name: "recreated pod", status: 200, body: summaryJSON(uid2, now, 10244096), maxAge: 5 * time.Second, volume: "empty", wantReason: MeasureNotFound},
		{name: "volume not measured yet", status: 200, body: summaryJSON(uid1, now, 1), maxAge: 5 * time.Second, volume: "data", wantReason: MeasureNotFound},
		{name: "pod unknown", status: 200, body: `{"node": {"nodeName": "node-1"}, "pods": []}`, maxAge: 5 * time.Second, volume: "empty", wantReason: MeasureNotFound},
		{name: "rootless kubelet fails", status: 500, body: `Internal error occurred: failed to get rootFs stats`, maxAge: 5 * time.Second, volume: "empty", wantReason: MeasureUnavailable},
		{name: "node unknown", status: 404, body: `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"nodes \"node-1\" not found","reason":"NotFound","code":404}`, maxAge: 5 * time.Second, volume: "empty", wantReason: MeasureNotFound},
		{name: "forbidden", status: 403, body: `{"kind":"Status","status":"Failure","message":"forbidden","code":403}`, maxAge: 5 * time.Second, volume: "empty", wantReason: MeasureBadResponse},
		{name: "malformed JSON", status: 200, body: `{"pods": [{"podRef": `, maxAge: 5 * time.Second, volume: "empty", wantReason: MeasureBadResponse},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var gotPath string
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				gotPath = r.URL.Path
				w.WriteHeader(tt.status)
				_, _ = w.Write([]byte(tt.body))
			}))
			defer ts.Close()
			client, err := kubernetes.NewForConfig(&rest.Config{Host: ts.URL})
			if err != nil {
				t.Fatal(err)
			}
			got, err := measureAndJudge(t.Context(), NewKubeletMeasurer(client), pod, tt.volume, tt.maxAge)
			if gotPath != "/api/v1/nodes/node-1/proxy/stats/summary" {
				t.Errorf("requested %q", gotPath)
			}
			assertMeasurement(t, got, err, tt.wantUsed, tt.wantReason)
			if err == nil && got.Source != SourceKubelet {
				t.Errorf("source %q", got.Source)
			}
		})
	}
}

func TestCheckFresh(t *testing.T) {
	tests := []struct {
		at         time.Time
		wantReason string
	}{
		{testNow, ""},
		{testNow.Add(-5 * time.Second), ""},
		{testNow.Add(-5*time.Second - time.Millisecond), MeasureStale},
		{testNow.Add(2 * time.Second), ""},
		{testNow.Add(time.Minute), MeasureBadResponse},
		{time.Time{}, MeasureBadResponse},
	}
	for _, tt := range tests {
		err := checkFresh(tt.at, testNow, 5*time.Second)
		if tt.wantReason == "" {
			if err != nil {
				t.Errorf("checkFresh(%v) = %v", tt.at, err)
			}
			continue
		}
		if got := measurementReason(err); err == nil || got != tt.wantReason {
			t.Errorf("checkFresh(%v) = %v, want reason %q", tt.at, err, tt.wantReason)
		}
	}
}
