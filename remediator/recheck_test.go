package remediator

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

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
	// incompleteFor sets incompleteSince that long before the walk ended; 0 leaves it out.
	incompleteFor time.Duration
}

func (a liveAnswer) body(t *testing.T, now time.Time) []byte {
	t.Helper()
	completed := now.Add(-a.endedAgo)
	started := completed.Add(-a.walk)
	limit := int64(mib)
	vol := liveapi.Volume{Name: "empty", Medium: "disk", UsedBytes: &a.used, LimitBytes: &limit,
		CapacityBytes: 1 << 40, InodesUsed: 3, UnreadableEntries: a.unreadable, ChangedDirectories: a.changed,
		CutShort: a.cutShort, LowerBound: a.lowerBound, MeasuredAt: started}
	if !a.noCompletedAt {
		vol.CompletedAt = completed
	}
	if a.incompleteFor > 0 {
		vol.IncompleteSince = completed.Add(-a.incompleteFor)
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
		{name: "directories changed during the walk, lower bound under the limit: cannot decide, retry",
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
// measurement instead of walking the volume again; once it is too old (for a PDB-blocked pod,
// a minute), it is measured anew.
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
		{name: "throttled, a retry after the max age measures again", evictErr: apfThrottle(), wantOut: OutcomeThrottled,
			steps: []time.Duration{0, time.Second, 10 * time.Second}, wantRequests: 2},
		// Within the minute, a retry of a PDB-blocked pod past the max age asks a dry-run
		// eviction instead (TestPDBBlockedRetriesDoNotWalkAgain).
		{name: "PDB blocked, a retry a minute after the walk measures again", evictErr: pdbRefusal(), wantOut: OutcomePDBBlocked,
			steps: []time.Duration{0, time.Second, time.Minute}, wantRequests: 2},
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

// TestPDBBlockedRetriesDoNotWalkAgain: a tenant's over-limit pod that a PodDisruptionBudget
// keeps from eviction is re-checked on each of Alertmanager's retries, about ten a minute;
// walking its volume each time (the fresh measurement lasts 5 s) spent the remediator's live
// budget on its node for every tenant (issue 30, item 4). While a dry-run eviction is still
// refused, a retry answers from the blocked pod's measurement for up to a minute; once the
// budget lets go, the pod is measured afresh before anything is done.
func TestPDBBlockedRetriesDoNotWalkAgain(t *testing.T) {
	tests := []struct {
		name       string
		usedAtLast int64 // the volume when the budget lets go
		wantOut    Outcome
		wantReason string
	}{
		{name: "still over the limit: evicted", usedAtLast: 10 * mib, wantOut: OutcomeEvicted},
		{name: "brought under the limit meanwhile: left alone", usedAtLast: mib / 2, wantOut: OutcomeSkipped, wantReason: SkipNotOverLimit},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, testConfig(), newPod("tenant-a", "big-0", uid1).build())
			e.measurer.used[uid1] = 10 * mib
			var blocked atomic.Bool
			blocked.Store(true)
			e.client.PrependReactor("create", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
				if action.GetSubresource() != "eviction" || !blocked.Load() {
					return false, nil, nil
				}
				return true, nil, pdbRefusal()
			})
			deliver := func(step string, wantCode int, wantOut Outcome, wantReason string) {
				t.Helper()
				code, resp := e.post(payloadJSON(t, firing("tenant-a", "big-0", uid1)))
				if code != wantCode || len(resp.Alerts) != 1 || resp.Alerts[0].Outcome != wantOut || resp.Alerts[0].Reason != wantReason {
					t.Fatalf("%s: code %d %+v, want %d %s/%q", step, code, resp.Alerts, wantCode, wantOut, wantReason)
				}
			}
			deliver("first delivery", http.StatusServiceUnavailable, OutcomePDBBlocked, "pdb")
			for i := range 5 { // 10 s apart, each past the 5 s a measurement is fresh
				e.advance(10 * time.Second)
				deliver(fmt.Sprintf("retry %d", i+1), http.StatusServiceUnavailable, OutcomePDBBlocked, "pdb")
			}
			if e.measurer.calls != 1 {
				t.Errorf("%d walks for 6 deliveries within a minute of a blocked eviction, want 1", e.measurer.calls)
			}
			if evicted, dry := e.evictionKinds(); evicted != 1 || dry != 5 {
				t.Errorf("%d evictions and %d dry-run evictions, want 1 and 5 (each retry asks whether the budget still blocks)", evicted, dry)
			}
			if got := testutil.ToFloat64(e.srv.metrics.measureReused); got != 5 {
				t.Errorf("live_measurements_reused_total = %g, want 5", got)
			}
			e.advance(10 * time.Second) // 61 s after the walk: measured again
			deliver("a retry a minute after the walk", http.StatusServiceUnavailable, OutcomePDBBlocked, "pdb")
			if e.measurer.calls != 2 {
				t.Errorf("%d walks a minute after the first, want 2", e.measurer.calls)
			}
			blocked.Store(false)
			e.measurer.used[uid1] = tt.usedAtLast
			e.advance(10 * time.Second)
			deliver("the budget let go", http.StatusOK, tt.wantOut, tt.wantReason)
			if e.measurer.calls != 3 {
				t.Errorf("%d walks once the budget let go, want 3: never act on the blocked pod's old measurement", e.measurer.calls)
			}
		})
	}
}
