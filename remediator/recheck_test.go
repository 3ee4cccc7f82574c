package remediator

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/emptydir-guard/emptydir-guard/internal/liveapi"
)

// liveAnswer builds the exporter's live answer for the volume "empty" of pod
// default/web-0 (uid1) on node: a walk that took walk and ended endedAgo before the time of
// the request; noCompletedAt leaves completedAt out, as exporters before it did.
type liveAnswer struct {
	node             string
	walk, endedAgo   time.Duration
	noCompletedAt    bool
	used, unreadable int64
	// changed, cutShort, lowerBound: the other lower-bound fields of the answer.
	changed              int64
	cutShort, lowerBound bool
}

func (a liveAnswer) body(t *testing.T, now time.Time) []byte {
	t.Helper()
	completed := now.Add(-a.endedAgo)
	started := completed.Add(-a.walk)
	limit := int64(mib)
	vol := liveapi.Volume{Name: "empty", Medium: "disk", UsedBytes: &a.used, LimitBytes: &limit,
		CapacityBytes: 1 << 40, InodesUsed: 3, UnreadableEntries: a.unreadable, ChangedFolders: a.changed,
		CutShort: a.cutShort, LowerBound: a.lowerBound, MeasuredAt: started}
	if !a.noCompletedAt {
		vol.CompletedAt = completed
	}
	return encodeJSON(t, liveapi.Response{Node: a.node, Namespace: "default", Pod: "web-0", UID: uid1,
		Source: "filesystem", MeasuredAt: started, Volumes: []liveapi.Volume{vol}})
}

// exporterEnv is an env whose live re-check goes through a real ExporterMeasurer to an
// httptest exporter serving answer; it returns the env and the count of live requests.
func exporterEnv(t *testing.T, cfg Config, answer liveAnswer) (*env, *atomic.Int32) {
	t.Helper()
	var requests atomic.Int32
	var e *env
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		requests.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(answer.body(t, e.clock()))
	}))
	t.Cleanup(ts.Close)
	e = newEnvMeasuring(t, cfg, NewExporterMeasurer(ts.Client(), StaticLocator(ts.URL)), newPod("default", "web-0", uid1).build())
	return e, &requests
}

// The live answer is read whole: its node, its unreadable entries, the end of its walk.
func TestLiveRecheckThroughExporter(t *testing.T) {
	tests := []struct {
		name       string
		answer     liveAnswer
		wantCode   int
		wantOut    Outcome
		wantReason string
		wantEvicts int
	}{
		{name: "over the limit, everything read: evicted",
			answer:   liveAnswer{node: "node-1", walk: time.Second, endedAgo: time.Second, used: 10 * mib},
			wantCode: 200, wantOut: OutcomeEvicted, wantEvicts: 1},
		{name: "lower bound under the limit: cannot decide, retry",
			answer:   liveAnswer{node: "node-1", walk: time.Second, endedAgo: time.Second, used: mib / 2, unreadable: 3},
			wantCode: 503, wantOut: OutcomeError, wantReason: "measurement_incomplete"},
		{name: "lower bound exactly at the limit: cannot decide, retry",
			answer:   liveAnswer{node: "node-1", walk: time.Second, endedAgo: time.Second, used: mib, unreadable: 1},
			wantCode: 503, wantOut: OutcomeError, wantReason: "measurement_incomplete"},
		{name: "lower bound over the limit is proof: evicted",
			answer:   liveAnswer{node: "node-1", walk: time.Second, endedAgo: time.Second, used: 10 * mib, unreadable: 3},
			wantCode: 200, wantOut: OutcomeEvicted, wantEvicts: 1},
		{name: "folders changed during the walk, lower bound under the limit: cannot decide, retry",
			answer:   liveAnswer{node: "node-1", walk: time.Second, endedAgo: time.Second, used: mib / 2, changed: 2, lowerBound: true},
			wantCode: 503, wantOut: OutcomeError, wantReason: "measurement_incomplete"},
		{name: "walk cut short under the limit: cannot decide, retry",
			answer:   liveAnswer{node: "node-1", walk: time.Second, endedAgo: time.Second, used: mib / 2, cutShort: true, lowerBound: true},
			wantCode: 503, wantOut: OutcomeError, wantReason: "measurement_incomplete"},
		{name: "walk cut short already over the limit is proof: evicted",
			answer:   liveAnswer{node: "node-1", walk: time.Second, endedAgo: time.Second, used: 10 * mib, cutShort: true, lowerBound: true},
			wantCode: 200, wantOut: OutcomeEvicted, wantEvicts: 1},
		{name: "lower bound for a reason this remediator does not know: cannot decide, retry",
			answer:   liveAnswer{node: "node-1", walk: time.Second, endedAgo: time.Second, used: mib / 2, lowerBound: true},
			wantCode: 503, wantOut: OutcomeError, wantReason: "measurement_incomplete"},
		{name: "answer from another node's exporter: never acted on",
			answer:   liveAnswer{node: "node-2", walk: time.Second, endedAgo: time.Second, used: 10 * mib},
			wantCode: 503, wantOut: OutcomeError, wantReason: "measurement_wrong_node"},
		{name: "answer naming no node: never acted on",
			answer:   liveAnswer{walk: time.Second, endedAgo: time.Second, used: 10 * mib},
			wantCode: 503, wantOut: OutcomeError, wantReason: "measurement_wrong_node"},
		{name: "long walk of a big volume that just ended: fresh, evicted",
			answer:   liveAnswer{node: "node-1", walk: 40 * time.Second, endedAgo: time.Second, used: 10 * mib},
			wantCode: 200, wantOut: OutcomeEvicted, wantEvicts: 1},
		{name: "walk that ended too long ago: stale",
			answer:   liveAnswer{node: "node-1", walk: 40 * time.Second, endedAgo: 6 * time.Second, used: 10 * mib},
			wantCode: 503, wantOut: OutcomeError, wantReason: "measurement_stale"},
		{name: "older exporter without completedAt: judged by the walk's start",
			answer:   liveAnswer{node: "node-1", walk: 40 * time.Second, endedAgo: time.Second, noCompletedAt: true, used: 10 * mib},
			wantCode: 503, wantOut: OutcomeError, wantReason: "measurement_stale"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, _ := exporterEnv(t, testConfig(), tt.answer)
			code, resp := e.post(payloadJSON(t, firing("default", "web-0", uid1)))
			if code != tt.wantCode || len(resp.Alerts) != 1 {
				t.Fatalf("code %d, %+v; want %d", code, resp, tt.wantCode)
			}
			if got := resp.Alerts[0]; got.Outcome != tt.wantOut || got.Reason != tt.wantReason {
				t.Errorf("outcome/reason = %s/%q, want %s/%q (%s)", got.Outcome, got.Reason, tt.wantOut, tt.wantReason, got.Message)
			}
			if n := e.evictions(); n != tt.wantEvicts {
				t.Errorf("%d evictions, want %d", n, tt.wantEvicts)
			}
		})
	}
}

// Alertmanager retries a refused eviction within seconds: the retries reuse the fresh
// measurement instead of walking the volume again; once it is too old, it is measured anew.
func TestRefusedEvictionRetriesReuseFreshMeasurement(t *testing.T) {
	tests := []struct {
		name         string
		evictErr     error
		wantOut      Outcome
		steps        []time.Duration // clock advance before each retry
		wantRequests int32
	}{
		{name: "PDB blocked, retries within the max age", evictErr: pdbRefusal(), wantOut: OutcomePDBBlocked,
			steps: []time.Duration{0, time.Second, 2 * time.Second}, wantRequests: 1},
		{name: "throttled, retries within the max age", evictErr: apfThrottle(), wantOut: OutcomeThrottled,
			steps: []time.Duration{0, 3 * time.Second}, wantRequests: 1},
		{name: "PDB blocked, a retry after the max age measures again", evictErr: pdbRefusal(), wantOut: OutcomePDBBlocked,
			steps: []time.Duration{0, time.Second, 10 * time.Second}, wantRequests: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, requests := exporterEnv(t, testConfig(), liveAnswer{node: "node-1", walk: time.Second,
				endedAgo: time.Second, used: 10 * mib})
			e.injectEvictionError(tt.evictErr)
			for i, d := range tt.steps {
				e.advance(d)
				code, resp := e.post(payloadJSON(t, firing("default", "web-0", uid1)))
				if code != http.StatusServiceUnavailable || resp.Alerts[0].Outcome != tt.wantOut {
					t.Fatalf("delivery %d: code %d, %+v", i, code, resp.Alerts)
				}
			}
			if n := requests.Load(); n != tt.wantRequests {
				t.Errorf("%d live requests for %d deliveries, want %d", n, len(tt.steps), tt.wantRequests)
			}
			if _, err := e.client.CoreV1().Pods("default").Get(t.Context(), "web-0", metav1.GetOptions{}); err != nil {
				t.Errorf("pod gone after refused evictions: %v", err)
			}
		})
	}
}
