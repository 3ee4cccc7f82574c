package remediator

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// limitersKept bounds the buckets remembered per scope; beyond it, the full ones are forgotten
// (they owe nothing), as the exporter's live budgets are.
const limitersKept = 4096

// Scopes of the notice buckets: the reason of a notice refused with 429.
const (
	NoticeLimitNamespace = "namespace"
	NoticeLimitNode      = "node"
)

// noticeLimits holds a token bucket per namespace and one per node: a tenant that crosses its
// limits again and again spends its namespace's bucket, not the other tenants' re-checks, and
// one node's exporter no more than its own.
type noticeLimits struct {
	perNamespace, perNode int
	now                   func() time.Time

	mu         sync.Mutex
	namespaces map[string]*rate.Limiter
	nodes      map[string]*rate.Limiter
}

func newNoticeLimits(cfg NoticeConfig, now func() time.Time) *noticeLimits {
	return &noticeLimits{perNamespace: cfg.PerNamespace, perNode: cfg.PerNode, now: now,
		namespaces: map[string]*rate.Limiter{}, nodes: map[string]*rate.Limiter{}}
}

// allow takes one notice from both buckets, or from neither: it returns the scope whose bucket
// is empty, "" when the notice may be handled.
func (l *noticeLimits) allow(node, namespace string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	ns := limiterIn(l.namespaces, namespace, l.perNamespace, now)
	nd := limiterIn(l.nodes, node, l.perNode, now)
	if ns.TokensAt(now) < 1 {
		return NoticeLimitNamespace
	}
	if nd.TokensAt(now) < 1 {
		return NoticeLimitNode
	}
	ns.AllowN(now, 1)
	nd.AllowN(now, 1)
	return ""
}

// limiterIn returns key's bucket of perMinute notices in m, a full one when m has none.
func limiterIn(m map[string]*rate.Limiter, key string, perMinute int, now time.Time) *rate.Limiter {
	if l := m[key]; l != nil {
		return l
	}
	if len(m) >= limitersKept {
		for k, l := range m {
			if l.TokensAt(now) >= float64(l.Burst()) {
				delete(m, k)
			}
		}
	}
	l := rate.NewLimiter(rate.Every(time.Minute/time.Duration(perMinute)), perMinute)
	m[key] = l
	return l
}
