package remediator

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestMetricsLint(t *testing.T) {
	e := newEnv(t, testConfig())
	problems, err := testutil.CollectAndLint(e.srv.Registry())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
	// Every metric of docs/metrics.md is exposed from the start, but webhook_requests_total,
	// whose series are per status code: it appears with the first request.
	fromStart := []string{
		"emptydir_remediator_webhook_duration_seconds",
		"emptydir_remediator_alerts_total", "emptydir_remediator_skips_total", "emptydir_remediator_evictions_total",
		"emptydir_remediator_live_measurement_duration_seconds", "emptydir_remediator_live_measurement_errors_total",
		"emptydir_remediator_live_measurements_reused_total", "emptydir_remediator_is_leader", "emptydir_remediator_standby_requests_total", "emptydir_remediator_ledger_operations_total", "emptydir_remediator_notices_total", "emptydir_remediator_build_info", "go_goroutines", "process_start_time_seconds",
	}
	checkExposed(t, e.srv.Registry(), fromStart)
	if code, _ := e.post([]byte(`{"version":"3"}`)); code != http.StatusBadRequest {
		t.Fatalf("bad webhook: %d", code)
	}
	checkExposed(t, e.srv.Registry(), []string{"emptydir_remediator_webhook_requests_total"})
}

// checkExposed fails t for each metric of want that reg does not expose.
func checkExposed(t *testing.T, reg prometheus.Gatherer, want []string) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, mf := range mfs {
		have[mf.GetName()] = true
	}
	for _, n := range want {
		if !have[n] {
			t.Errorf("metric %s not exposed", n)
		}
	}
}

// After a scenario, the counters say exactly what happened.
func TestMetricsAfterScenario(t *testing.T) {
	e := newEnv(t, testConfig(),
		newPod("default", "evict-me", testUID("a")).build(),
		newPod("default", "small", testUID("b")).build(),
		newPod("default", "recreated", testUID("new")).build(),
		newPod("kube-system", "ds", testUID("ds")).ownedBy("apps/v1", "DaemonSet").build(),
		newPod("default", "blocked", testUID("pdb")).build(),
		newPod("default", "throttled", testUID("apf")).build(),
	)
	for uid, used := range map[string]int64{testUID("a"): 10 * mib, testUID("b"): 10, testUID("new"): 10 * mib, testUID("ds"): 10 * mib, testUID("pdb"): 10 * mib, testUID("apf"): 10 * mib} {
		e.measurer.used[uid] = used
	}
	e.client.PrependReactor("create", "pods", evictionErrorFor("blocked", pdbRefusal()))
	e.client.PrependReactor("create", "pods", evictionErrorFor("throttled", apfThrottle()))

	if code, _ := e.post(payloadJSON(t,
		firing("default", "evict-me", testUID("a")),
		firing("default", "small", testUID("b")),
		firing("default", "recreated", testUID("old")),
		firing("kube-system", "ds", testUID("ds")),
		firing("default", "gone", testUID("gone")),
		resolved(firing("default", "evict-me", testUID("a"))),
	)); code != http.StatusOK {
		t.Fatalf("first webhook: %d", code)
	}
	if code, _ := e.post(payloadJSON(t, firing("default", "blocked", testUID("pdb")))); code != http.StatusServiceUnavailable {
		t.Fatalf("PDB webhook: %d", code)
	}
	// Alertmanager's retry of the blocked eviction reuses the fresh measurement.
	if code, _ := e.post(payloadJSON(t, firing("default", "blocked", testUID("pdb")))); code != http.StatusServiceUnavailable {
		t.Fatalf("PDB webhook retry: %d", code)
	}
	if code, _ := e.post(payloadJSON(t, firing("default", "throttled", testUID("apf")))); code != http.StatusServiceUnavailable {
		t.Fatalf("throttled webhook: %d", code)
	}
	// The repeat is answered from the ledger: a duplicate.
	if code, _ := e.post(payloadJSON(t, firing("default", "evict-me", testUID("a")))); code != http.StatusOK {
		t.Fatalf("repeat webhook: %d", code)
	}
	// Past the maximum age, so that the measurement of the first webhook is not reused.
	e.advance(time.Minute)
	e.measurer.err = measureErr(MeasureStale, "old")
	if code, _ := e.post(payloadJSON(t, firing("default", "small", testUID("b")))); code != http.StatusServiceUnavailable {
		t.Fatalf("stale webhook: %d", code)
	}
	if code, _ := e.post([]byte(`{"version":"3"}`)); code != http.StatusBadRequest {
		t.Fatalf("bad webhook: %d", code)
	}

	const want = `
# HELP emptydir_remediator_alerts_total Alerts handled, by what came of them.
# TYPE emptydir_remediator_alerts_total counter
emptydir_remediator_alerts_total{outcome="dry_run"} 0
emptydir_remediator_alerts_total{outcome="error"} 1
emptydir_remediator_alerts_total{outcome="evicted"} 1
emptydir_remediator_alerts_total{outcome="gone"} 1
emptydir_remediator_alerts_total{outcome="not_leader"} 0
emptydir_remediator_alerts_total{outcome="pdb_blocked"} 2
emptydir_remediator_alerts_total{outcome="resolved"} 1
emptydir_remediator_alerts_total{outcome="skipped"} 4
emptydir_remediator_alerts_total{outcome="throttled"} 1
# HELP emptydir_remediator_evictions_total Eviction API calls and their results.
# TYPE emptydir_remediator_evictions_total counter
emptydir_remediator_evictions_total{result="dry_run"} 0
emptydir_remediator_evictions_total{result="error"} 0
emptydir_remediator_evictions_total{result="evicted"} 1
emptydir_remediator_evictions_total{result="not_found"} 0
emptydir_remediator_evictions_total{result="pdb_blocked"} 2
emptydir_remediator_evictions_total{result="throttled"} 1
emptydir_remediator_evictions_total{result="unconfirmed"} 0
# HELP emptydir_remediator_live_measurement_errors_total Live re-checks that failed, by reason.
# TYPE emptydir_remediator_live_measurement_errors_total counter
emptydir_remediator_live_measurement_errors_total{reason="bad_response"} 0
emptydir_remediator_live_measurement_errors_total{reason="incomplete"} 0
emptydir_remediator_live_measurement_errors_total{reason="no_exporter"} 0
emptydir_remediator_live_measurement_errors_total{reason="not_found"} 0
emptydir_remediator_live_measurement_errors_total{reason="stale"} 1
emptydir_remediator_live_measurement_errors_total{reason="unavailable"} 0
emptydir_remediator_live_measurement_errors_total{reason="unreachable"} 0
emptydir_remediator_live_measurement_errors_total{reason="wrong_node"} 0
# HELP emptydir_remediator_live_measurements_reused_total Live re-checks answered from an earlier measurement of the same pod UID and volume.
# TYPE emptydir_remediator_live_measurements_reused_total counter
emptydir_remediator_live_measurements_reused_total 1
# HELP emptydir_remediator_webhook_requests_total Webhook requests by HTTP status code.
# TYPE emptydir_remediator_webhook_requests_total counter
emptydir_remediator_webhook_requests_total{code="200"} 2
emptydir_remediator_webhook_requests_total{code="400"} 1
emptydir_remediator_webhook_requests_total{code="503"} 4
# HELP emptydir_remediator_is_leader 1 on the replica that holds the leader lease (always 1 without leader election).
# TYPE emptydir_remediator_is_leader gauge
emptydir_remediator_is_leader 1
`
	if err := testutil.CollectAndCompare(e.srv.Registry(), strings.NewReader(want),
		"emptydir_remediator_alerts_total", "emptydir_remediator_evictions_total",
		"emptydir_remediator_live_measurement_errors_total", "emptydir_remediator_live_measurements_reused_total",
		"emptydir_remediator_webhook_requests_total",
		"emptydir_remediator_is_leader"); err != nil {
		t.Error(err)
	}
	skips := map[string]float64{SkipNotOverLimit: 1, SkipRecreated: 1, SkipDaemonSet: 1, SkipDuplicate: 1, SkipCooldown: 0, SkipCapGlobal: 0}
	for reason, want := range skips {
		if got := testutil.ToFloat64(e.srv.metrics.skips.WithLabelValues(reason)); got != want {
			t.Errorf("skips_total{reason=%q} = %g, want %g", reason, got, want)
		}
	}
	if got := testutil.CollectAndCount(e.srv.metrics.webhookDuration); got != 1 {
		t.Errorf("webhook_duration_seconds series %d", got)
	}
}
