package remediator

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// leaderLosingMeasurer measures with the env's fake measurer and makes the server lose the
// Lease while it measures the pod named losingOn: leadership moves mid-payload.
type leaderLosingMeasurer struct {
	e        **env
	losingOn string
}

func (m leaderLosingMeasurer) Measure(ctx context.Context, pod *corev1.Pod, subject Subject) (Measurement, error) {
	if pod.Name == m.losingOn {
		(*m.e).srv.setLeader(false)
	}
	return (*m.e).measurer.Measure(ctx, pod, subject)
}

// A replica that loses leadership while working through a payload stops before acting:
// the alerts after the loss are not evicted (nor dry-run evicted) and Alertmanager is told
// to retry, on the new leader.
func TestLeadershipLostMidPayloadStopsEvicting(t *testing.T) {
	tests := []struct {
		name          string
		dryRun        bool
		wantFirst     Outcome
		wantEvictions int     // Eviction API calls
		wantDryRuns   float64 // evictions_total{result="dry_run"}
	}{
		{name: "evicting", wantFirst: OutcomeEvicted, wantEvictions: 1},
		{name: "dry run", dryRun: true, wantFirst: OutcomeDryRun, wantDryRuns: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.LeaderElection = true
			cfg.DryRun = tt.dryRun
			var e *env
			e = newEnvMeasuring(t, cfg, leaderLosingMeasurer{e: &e, losingOn: "b"},
				newPod("default", "a", uid1).build(), newPod("default", "b", uid2).build())
			e.measurer.used[uid1], e.measurer.used[uid2] = 10*mib, 10*mib
			leadNow(e.srv)

			code, resp := e.post(payloadJSON(t, firing("default", "a", uid1), firing("default", "b", uid2)))
			if code != http.StatusServiceUnavailable || len(resp.Alerts) != 2 {
				t.Fatalf("code %d, %+v; want 503 so that Alertmanager retries on the new leader", code, resp)
			}
			if got := resp.Alerts[0].Outcome; got != tt.wantFirst {
				t.Errorf("alert handled while leading: %s, want %s", got, tt.wantFirst)
			}
			if got := resp.Alerts[1]; got.Outcome != OutcomeNotLeader || got.Reason != "not_leader" {
				t.Errorf("alert after the loss: %s/%q (%s), want not_leader", got.Outcome, got.Reason, got.Message)
			}
			if n := e.evictions(); n != tt.wantEvictions {
				t.Errorf("%d eviction calls, want %d", n, tt.wantEvictions)
			}
			if _, err := e.client.CoreV1().Pods("default").Get(t.Context(), "b", metav1.GetOptions{}); apierrors.IsNotFound(err) {
				t.Error("pod b was evicted after leadership was lost")
			}
			if got := testutil.ToFloat64(e.srv.metrics.evictions.WithLabelValues(EvictionDryRun)); got != tt.wantDryRuns {
				t.Errorf("dry-run evictions %g, want %g", got, tt.wantDryRuns)
			}
			if got := testutil.ToFloat64(e.srv.metrics.alerts.WithLabelValues(string(OutcomeNotLeader))); got != 1 {
				t.Errorf("alerts_total{outcome=not_leader} = %g, want 1", got)
			}
			// The new leader is not held back by a cooldown or cap the old one never used.
			leadNow(e.srv)
			if code, resp := e.post(payloadJSON(t, firing("default", "b", uid2))); code != http.StatusOK || resp.Alerts[0].Outcome != tt.wantFirst {
				t.Errorf("retry as leader: code %d, %+v", code, resp.Alerts)
			}
		})
	}
}

// The elector's flag lags: client-go notices a failed renewal only when its renew loop gives
// up. A replica whose last Lease renewal is older than the renew deadline does not evict,
// even while the flag still says it leads; within the deadline it does.
func TestStaleLeaseRenewalStopsEvicting(t *testing.T) {
	tests := []struct {
		name          string
		renewedAgo    time.Duration
		want          Outcome
		wantEvictions int
	}{
		{name: "renewed recently", renewedAgo: time.Second, want: OutcomeEvicted, wantEvictions: 1},
		{name: "renewal older than the renew deadline", renewedAgo: 11 * time.Second, want: OutcomeNotLeader},
		{name: "never renewed", want: OutcomeNotLeader},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.LeaderElection = true
			e := newEnv(t, cfg, newPod("default", "a", uid1).build())
			e.measurer.used[uid1] = 10 * mib
			e.srv.leaseTiming.Store(&leaseTiming{renewDeadline: 10 * time.Second, leaseDuration: 15 * time.Second})
			if tt.renewedAgo > 0 {
				e.srv.leaseRenewed.Store(time.Now().Add(-tt.renewedAgo).UnixNano())
			}
			e.srv.setLeader(true) // the elector has not noticed anything
			res := e.srv.handleAlert(t.Context(), 0, firing("default", "a", uid1))
			if res.Outcome != tt.want {
				t.Errorf("%s/%s %q, want %s", res.Outcome, res.Reason, res.Message, tt.want)
			}
			if n := e.evictions(); n != tt.wantEvictions {
				t.Errorf("%d eviction calls, want %d", n, tt.wantEvictions)
			}
		})
	}
}
