package remediator

import "time"

// evictionRecord is one eviction (or dry-run eviction) counted against the caps.
type evictionRecord struct {
	At        time.Time
	Node      string
	Namespace string
}

// Caps limits evictions within a sliding window. A zero or negative limit is no limit.
type Caps struct {
	PerNode      int
	PerNamespace int
	Global       int
	Window       time.Duration
}

// capExceeded reports which cap, if any, one more eviction of a pod on node in namespace would
// exceed given the earlier evictions. It returns the skip reason (SkipCapGlobal,
// SkipCapNamespace, SkipCapNode) or "" when the eviction fits every cap. Records outside the
// window [now-Window, now] are ignored.
func capExceeded(records []evictionRecord, node, namespace string, now time.Time, caps Caps) string {
	var global, perNS, perNode int
	for _, r := range records {
		if caps.Window > 0 && now.Sub(r.At) >= caps.Window {
			continue
		}
		global++
		if r.Namespace == namespace {
			perNS++
		}
		if r.Node == node {
			perNode++
		}
	}
	switch {
	case caps.Global > 0 && global >= caps.Global:
		return SkipCapGlobal
	case caps.PerNamespace > 0 && perNS >= caps.PerNamespace:
		return SkipCapNamespace
	case caps.PerNode > 0 && perNode >= caps.PerNode:
		return SkipCapNode
	}
	return ""
}
