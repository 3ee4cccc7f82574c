package remediator

import (
	"strings"
	"testing"
	"time"
)

// incompleteAlert is EmptyDirMeasurementIncomplete for the volume "empty" of default/web-0,
// firing since firingFor before the test's time.
func incompleteAlert(firingFor time.Duration) Alert {
	a := firing("default", "web-0", uid1)
	a.Labels["alertname"] = "EmptyDirMeasurementIncomplete"
	a.Labels[LabelRemediation] = RemediationEvictIncomplete
	a.StartsAt = testNow.Add(-firingFor)
	return a
}

func withoutStart(a Alert) Alert { a.StartsAt = time.Time{}; return a }

// A volume measurable only as a lower bound under its limit (a tenant racing every walk) is
// evicted only by the opt-in policy, after the alert that says so has fired for
// --policy.evict-incomplete-after, and only if the live re-check is still a lower bound; an
// over-limit alert never takes that path, and with the policy off nothing is measured.
func TestEvictIncompletePolicy(t *testing.T) {
	racing := liveAnswer{node: "node-1", walk: time.Second, endedAgo: time.Second, used: mib / 2, changed: 3, lowerBound: true}
	tests := []struct {
		name         string
		after        time.Duration // Config.EvictIncompleteAfter
		alert        Alert
		answer       liveAnswer
		wantCode     int
		wantOut      Outcome
		wantReason   string
		wantEvicts   int
		wantRequests int32
		wantEvent    string
	}{
		{name: "policy off (the default): skipped, nothing measured",
			alert: incompleteAlert(24 * time.Hour), answer: racing,
			wantCode: 200, wantOut: OutcomeSkipped, wantReason: SkipIncompletePolicyOff},
		{name: "policy on, the alert younger than the policy: skipped, nothing measured",
			after: time.Hour, alert: incompleteAlert(59 * time.Minute), answer: racing,
			wantCode: 200, wantOut: OutcomeSkipped, wantReason: SkipIncompleteTooRecent},
		{name: "policy on, still a lower bound under the limit after it: evicted",
			after: time.Hour, alert: incompleteAlert(time.Hour), answer: racing,
			wantCode: 200, wantOut: OutcomeEvicted, wantEvicts: 1, wantRequests: 1,
			wantEvent: `could be measured only as a lower bound for 1h0m0s (--policy.evict-incomplete-after=1h0m0s)`},
		{name: "policy on, measured completely under the limit now: not evicted",
			after: time.Hour, alert: incompleteAlert(2 * time.Hour),
			answer:   liveAnswer{node: "node-1", walk: time.Second, endedAgo: time.Second, used: mib / 2},
			wantCode: 200, wantOut: OutcomeSkipped, wantReason: SkipNotOverLimit, wantRequests: 1},
		{name: "policy on, measured completely over the limit now: evicted for the limit",
			after: time.Hour, alert: incompleteAlert(2 * time.Hour),
			answer:   liveAnswer{node: "node-1", walk: time.Second, endedAgo: time.Second, used: 2 * mib},
			wantCode: 200, wantOut: OutcomeEvicted, wantEvicts: 1, wantRequests: 1,
			wantEvent: `Usage of EmptyDir volume "empty" exceeds the limit "1Mi"`},
		{name: "policy on, an over-limit alert whose re-check is a lower bound under the limit: cannot decide",
			after: time.Hour, alert: firing("default", "web-0", uid1), answer: racing,
			wantCode: 503, wantOut: OutcomeError, wantReason: "measurement_incomplete", wantRequests: 1},
		{name: "policy on, an alert without a start: skipped",
			after: time.Hour, alert: withoutStart(incompleteAlert(2 * time.Hour)), answer: racing,
			wantCode: 200, wantOut: OutcomeSkipped, wantReason: SkipIncompleteTooRecent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.EvictIncompleteAfter = tt.after
			e, requests := exporterEnv(t, cfg, tt.answer)
			code, resp := e.post(payloadJSON(t, tt.alert))
			if code != tt.wantCode || len(resp.Alerts) != 1 {
				t.Fatalf("code %d, %+v; want %d", code, resp, tt.wantCode)
			}
			if got := resp.Alerts[0]; got.Outcome != tt.wantOut || got.Reason != tt.wantReason {
				t.Errorf("outcome/reason = %s/%q, want %s/%q (%s)", got.Outcome, got.Reason, tt.wantOut, tt.wantReason, got.Message)
			}
			if n := e.evictions(); n != tt.wantEvicts {
				t.Errorf("%d evictions, want %d", n, tt.wantEvicts)
			}
			if n := requests.Load(); n != tt.wantRequests {
				t.Errorf("%d live measurements, want %d", n, tt.wantRequests)
			}
			if tt.wantEvent != "" {
				events := strings.Join(e.events(), "\n")
				if !strings.Contains(events, tt.wantEvent) {
					t.Errorf("events %q do not say %q", events, tt.wantEvent)
				}
			}
		})
	}
}
