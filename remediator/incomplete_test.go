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
// evicted only by the opt-in policy, and only on the exporter's evidence: the live re-check is
// a lower bound that the exporter says has been one for --policy.evict-incomplete-after. The
// alert's startsAt and remediation label only route (issue 37, item 6): a forged alert that
// says "incomplete for hours" over a lower bound the exporter has seen for a minute evicts
// nothing, and with the policy off nothing is measured.
func TestEvictIncompletePolicy(t *testing.T) {
	racing := func(incompleteFor time.Duration) liveAnswer {
		return liveAnswer{node: "node-1", walk: time.Second, endedAgo: time.Second, used: mib / 2, changed: 3, lowerBound: true, incompleteFor: incompleteFor}
	}
	ordinary := firing("default", "web-0", uid1)
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
			alert: incompleteAlert(24 * time.Hour), answer: racing(24 * time.Hour),
			wantCode: 200, wantOut: OutcomeSkipped, wantReason: SkipIncompletePolicyOff},
		{name: "a forged alert firing for a day, the exporter's lower bound a minute old: not evicted",
			after: time.Hour, alert: incompleteAlert(24 * time.Hour), answer: racing(time.Minute),
			wantCode: 200, wantOut: OutcomeSkipped, wantReason: SkipIncompleteTooRecent, wantRequests: 1},
		{name: "a lower bound for two hours by the exporter's record: evicted",
			after: time.Hour, alert: incompleteAlert(2 * time.Hour), answer: racing(2 * time.Hour),
			wantCode: 200, wantOut: OutcomeEvicted, wantEvicts: 1, wantRequests: 1,
			wantEvent: `could be measured only as a lower bound for 2h0m0s (--policy.evict-incomplete-after=1h0m0s)`},
		{name: "the alert a minute old, the exporter's lower bound two hours: evicted (the alert's age decides nothing)",
			after: time.Hour, alert: incompleteAlert(time.Minute), answer: racing(2 * time.Hour),
			wantCode: 200, wantOut: OutcomeEvicted, wantEvicts: 1, wantRequests: 1},
		{name: "an alert without a start, the exporter's lower bound two hours: evicted",
			after: time.Hour, alert: withoutStart(incompleteAlert(2 * time.Hour)), answer: racing(2 * time.Hour),
			wantCode: 200, wantOut: OutcomeEvicted, wantEvicts: 1, wantRequests: 1},
		{name: "an exporter that does not say since when: not evicted",
			after: time.Hour, alert: incompleteAlert(24 * time.Hour), answer: racing(0),
			wantCode: 200, wantOut: OutcomeSkipped, wantReason: SkipIncompleteTooRecent, wantRequests: 1},
		{name: "policy on, measured completely under the limit now: not evicted",
			after: time.Hour, alert: incompleteAlert(2 * time.Hour),
			answer:   liveAnswer{node: "node-1", walk: time.Second, endedAgo: time.Second, used: mib / 2},
			wantCode: 200, wantOut: OutcomeSkipped, wantReason: SkipNotOverLimit, wantRequests: 1},
		{name: "policy on, measured completely over the limit now: evicted for the limit",
			after: time.Hour, alert: incompleteAlert(2 * time.Hour),
			answer:   liveAnswer{node: "node-1", walk: time.Second, endedAgo: time.Second, used: 2 * mib},
			wantCode: 200, wantOut: OutcomeEvicted, wantEvicts: 1, wantRequests: 1,
			wantEvent: `Usage of EmptyDir volume "empty" exceeds the limit "1Mi"`},
		{name: "policy on, an over-limit alert whose re-check the exporter has seen a lower bound for two hours: evicted on its evidence",
			after: time.Hour, alert: ordinary, answer: racing(2 * time.Hour),
			wantCode: 200, wantOut: OutcomeEvicted, wantEvicts: 1, wantRequests: 1,
			wantEvent: `could be measured only as a lower bound for 2h0m0s`},
		{name: "policy on, an over-limit alert whose re-check is a lower bound for a minute: cannot decide",
			after: time.Hour, alert: ordinary, answer: racing(time.Minute),
			wantCode: 503, wantOut: OutcomeError, wantReason: "measurement_incomplete", wantRequests: 1},
		{name: "policy off, an over-limit alert whose re-check is a lower bound for two hours: cannot decide",
			alert: ordinary, answer: racing(2 * time.Hour),
			wantCode: 503, wantOut: OutcomeError, wantReason: "measurement_incomplete", wantRequests: 1},
		{name: "a lower bound over the limit proves it, whatever its age",
			after: time.Hour, alert: ordinary,
			answer:   liveAnswer{node: "node-1", walk: time.Second, endedAgo: time.Second, used: 2 * mib, changed: 3, lowerBound: true, incompleteFor: time.Second},
			wantCode: 200, wantOut: OutcomeEvicted, wantEvicts: 1, wantRequests: 1,
			wantEvent: `Usage of EmptyDir volume "empty" exceeds the limit "1Mi"`},
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
