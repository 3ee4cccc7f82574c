package remediator

import "net/http"

// Outcome is what came of one alert. The values are the `outcome` label of
// emptydir_remediator_alerts_total.
type Outcome string

// Outcomes of an alert.
const (
	OutcomeEvicted    Outcome = "evicted"
	OutcomeDryRun     Outcome = "dry_run"
	OutcomeSkipped    Outcome = "skipped"
	OutcomePDBBlocked Outcome = "pdb_blocked"
	// OutcomeThrottled: the API server refused the eviction to protect itself (API Priority
	// and Fairness, max-inflight), not because of a PodDisruptionBudget.
	OutcomeThrottled Outcome = "throttled"
	OutcomeGone      Outcome = "gone"
	OutcomeError     Outcome = "error"
	// OutcomeNotLeader: this replica lost leadership while handling the payload and stopped
	// before acting; the retry reaches the new leader.
	OutcomeNotLeader Outcome = "not_leader"
	OutcomeResolved  Outcome = "resolved"
)

// AllOutcomes lists every outcome, in documentation order.
var AllOutcomes = []Outcome{OutcomeEvicted, OutcomeDryRun, OutcomeSkipped, OutcomePDBBlocked, OutcomeThrottled, OutcomeGone, OutcomeError, OutcomeNotLeader, OutcomeResolved}

// Retryable reports whether a later delivery of the same alert may end differently, so that
// Alertmanager should retry it.
func (o Outcome) Retryable() bool {
	switch o {
	case OutcomePDBBlocked, OutcomeThrottled, OutcomeError, OutcomeNotLeader:
		return true
	}
	return false
}

// ReasonEnded is the reason of a gone outcome for a pod whose containers have ended (phase
// Failed or Succeeded), as "terminating" and "not_found" are for the others.
const ReasonEnded = "ended"

// Skip reasons: the `reason` label of emptydir_remediator_skips_total.
const (
	SkipRecreated    = "recreated"
	SkipNotOverLimit = "not_over_limit"
	SkipNamespace    = "namespace"
	SkipSelector     = "selector"
	SkipOptOut       = "opt_out"
	SkipMirrorPod    = "mirror_pod"
	SkipDaemonSet    = "daemonset"
	SkipCritical     = "critical"
	SkipCooldown     = "cooldown"
	SkipCapNode      = "cap_node"
	SkipCapNamespace = "cap_namespace"
	SkipCapGlobal    = "cap_global"
	SkipDuplicate    = "duplicate"
	// SkipIncompletePolicyOff: an alert of a subject measurable only as a lower bound, without
	// Config.EvictIncompleteAfter.
	SkipIncompletePolicyOff = "incomplete_policy_off"
	// SkipIncompleteTooRecent: such an alert whose subject the live re-check finds a lower bound
	// under its limit that the exporter has not seen as one for EvictIncompleteAfter yet (or
	// does not say since when).
	SkipIncompleteTooRecent = "incomplete_too_recent"
)

// AllSkipReasons lists every skip reason.
var AllSkipReasons = []string{
	SkipRecreated, SkipNotOverLimit, SkipNamespace, SkipSelector, SkipOptOut, SkipMirrorPod,
	SkipDaemonSet, SkipCritical, SkipCooldown, SkipCapNode, SkipCapNamespace, SkipCapGlobal, SkipDuplicate,
	SkipIncompletePolicyOff, SkipIncompleteTooRecent,
}

// Eviction API call results: the `result` label of emptydir_remediator_evictions_total.
const (
	EvictionEvicted    = "evicted"
	EvictionDryRun     = "dry_run"
	EvictionPDBBlocked = "pdb_blocked"
	EvictionThrottled  = "throttled"
	EvictionNotFound   = "not_found"
	EvictionError      = "error"
	// EvictionUnconfirmed: the answer was lost (timeout, 5xx, broken connection); the
	// eviction may have happened.
	EvictionUnconfirmed = "unconfirmed"
)

// AllEvictionResults lists every eviction result.
var AllEvictionResults = []string{EvictionEvicted, EvictionDryRun, EvictionPDBBlocked, EvictionThrottled, EvictionNotFound, EvictionError, EvictionUnconfirmed}

// AlertResult reports what happened to one alert of a webhook payload.
type AlertResult struct {
	Index       int     `json:"index"`
	Fingerprint string  `json:"fingerprint,omitempty"`
	Target      Target  `json:"target"`
	Node        string  `json:"node,omitempty"`
	Outcome     Outcome `json:"outcome"`
	// Reason is the skip reason for OutcomeSkipped, a short machine-readable cause otherwise.
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message"`
	// UsedBytes and LimitBytes are the live measurement and the pod's current limit, when known.
	UsedBytes  *int64 `json:"usedBytes,omitempty"`
	LimitBytes *int64 `json:"limitBytes,omitempty"`
	Source     string `json:"source,omitempty"`
	// UnreadableEntries > 0 means UsedBytes is a lower bound.
	UnreadableEntries int64 `json:"unreadableEntries,omitempty"`
	// LowerBound says UsedBytes is a lower bound, for any reason (Measurement.LowerBound).
	LowerBound bool `json:"lowerBound,omitempty"`
}

// WebhookResponse is the JSON body of every /webhook answer.
type WebhookResponse struct {
	Status string        `json:"status"`
	Error  string        `json:"error,omitempty"`
	Alerts []AlertResult `json:"alerts,omitempty"`
	// Problems lists malformed alerts of a rejected payload.
	Problems []AlertProblem `json:"problems,omitempty"`
}

// StatusCode maps the outcomes of the alerts of one payload to the HTTP status to answer,
// following Alertmanager's retry contract: Alertmanager retries 5xx (and 429) and gives up on
// other 4xx. So: 503 when any alert may end differently on a retry (a PodDisruptionBudget
// blocked the eviction, the API server throttled or failed, the live measurement failed or
// could not decide, this replica stopped leading); 200 otherwise
// (evicted, dry run, skipped, gone, resolved — also for a payload without alerts). Alerts
// that were already handled are not handled twice on the retry: the remediator remembers
// its evictions per pod UID.
func StatusCode(outcomes []Outcome) int {
	for _, o := range outcomes {
		if o.Retryable() {
			return http.StatusServiceUnavailable
		}
	}
	return http.StatusOK
}
