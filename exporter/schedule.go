package exporter

import (
	"cmp"
	"slices"
	"time"
)

// volumeState is what the collection remembers of one volume between cycles.
type volumeState struct {
	inFlight bool
	// started is when its last walk started; zero when it never did.
	started time.Time
	// usedBytes is what its last completed walk found; measured tells whether there was one.
	usedBytes int64
	measured  bool
	// cost is the CPU time attributed to its last completed walk.
	cost time.Duration
}

// dueWalk is a volume to walk in this cycle.
type dueWalk struct {
	pod PodVolumes
	vol Volume
	key volumeKey
	// cost is what the CPU budget must hold to start it: 0 (any credit) for a volume with
	// a sizeLimit, the cost of its last walk for the others.
	cost time.Duration
}

// dueWalks returns the volumes of pods to walk in a cycle starting at now, most urgent
// first. A volume with a sizeLimit can trigger an eviction: it is due every cycle, and the
// nearest to its limit (by its last usage) goes first; before all, one never measured, and
// then one whose last walk started unlimitedEvery ago or more (the longest unwalked first),
// so that a budget too small for every limited volume defers those far from their limit
// without starving them. A volume without a sizeLimit only feeds dashboards: it is due once
// every unlimitedEvery, in the cycle nearest to that (tolerance is half a cycle, so that
// timer jitter never pushes it a whole cycle late), after the limited ones, the longest
// unwalked first. A volume whose walk is still in flight is not due.
func dueWalks(pods []PodVolumes, state func(volumeKey) volumeState, now time.Time, unlimitedEvery, tolerance time.Duration) []dueWalk {
	type candidate struct {
		dueWalk
		tier    int       // limited: 0 never measured, 1 overdue, 2 by urgency
		urgency float64   // limited: usage/limit
		started time.Time // when its last walk started
	}
	slow := func(s volumeState) bool { // its slow-cadence walk is due
		return s.started.IsZero() || !now.Add(tolerance).Before(s.started.Add(unlimitedEvery))
	}
	var limited, unlimited []candidate
	for _, p := range pods {
		for _, v := range p.Volumes {
			k := volumeKey{p.UID, v.Name}
			s := state(k)
			if s.inFlight {
				continue
			}
			c := candidate{dueWalk: dueWalk{pod: p, vol: v, key: k}, started: s.started}
			switch {
			case v.LimitBytes != nil:
				switch {
				case !s.measured:
					c.tier = 0
				case unlimitedEvery > 0 && slow(s):
					c.tier = 1
				default:
					c.tier, c.urgency = 2, float64(s.usedBytes)/float64(*v.LimitBytes)
				}
				limited = append(limited, c)
			case slow(s):
				c.cost = s.cost
				unlimited = append(unlimited, c)
			}
		}
	}
	slices.SortStableFunc(limited, func(a, b candidate) int {
		if c := cmp.Compare(a.tier, b.tier); c != 0 || a.tier == 2 {
			return cmp.Or(c, cmp.Compare(b.urgency, a.urgency))
		}
		return a.started.Compare(b.started)
	})
	slices.SortStableFunc(unlimited, func(a, b candidate) int { return a.started.Compare(b.started) })
	out := make([]dueWalk, 0, len(limited)+len(unlimited))
	for _, c := range append(limited, unlimited...) {
		out = append(out, c.dueWalk)
	}
	return out
}
