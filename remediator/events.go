package remediator

// Reasons of the Events recorded on pods.
const (
	// EventOverLimit: the volume is over its limit, and the pod was not evicted (dry run or
	// policy); the message says why.
	EventOverLimit = "EmptyDirOverLimit"
	// EventEvicted: the pod was evicted through the Eviction API.
	EventEvicted = "EmptyDirEvicted"
	// EventEvictionBlocked: a PodDisruptionBudget blocked the eviction; Alertmanager retries.
	EventEvictionBlocked = "EmptyDirEvictionBlocked"
	// EventEvictionFailed: the Eviction API call failed otherwise; Alertmanager retries.
	EventEvictionFailed = "EmptyDirEvictionFailed"
)

// Actions of the Events (events.k8s.io/v1 action: what the remediator did, or would have done,
// regarding the pod).
const (
	// ActionCheck: the live re-check found the volume over its limit and the pod was not
	// evicted (EventOverLimit).
	ActionCheck = "Check"
	// ActionEvict: the pod was evicted, or its eviction was blocked or failed.
	ActionEvict = "Evict"
)

// EvictionReasonAnnotation is set on the Eviction object with a human-readable cause.
const EvictionReasonAnnotation = "emptydir-guard.io/reason"
