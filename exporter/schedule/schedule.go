package schedule

import (
	"cmp"
	"slices"
	"time"

	"github.com/emptydir-guard/emptydir-guard/exporter/part"
)

// State is what the collection remembers of one volume between cycles.
type State struct {
	InFlight bool
	// started is when its last walk started; zero when it never did.
	Started time.Time
	// seen is when a cycle first saw it.
	Seen time.Time
	// usedBytes is what its last completed walk found; measured tells whether there was one.
	UsedBytes int64
	Measured  bool
	// cost is the CPU time attributed to its last completed walk.
	Cost time.Duration
	// unchanged: its pod's change mark now is the one read before its last complete walk
	// began (change.Signal): nothing of the pod's can have grown by a write of its processes.
	Unchanged bool
}

// Walk is a volume to walk in this cycle.
type Walk struct {
	Pod    part.Pod
	Volume part.Part
	Key    part.Key
	// cost is what the CPU budget must hold to start it: 0 (any credit) for a volume with
	// a sizeLimit or an overdue one, the cost of its last walk for the others.
	Cost time.Duration
	// background: a volume without a sizeLimit at its slow cadence, walked behind the cycle's
	// back and published by the next one.
	Background bool
	// wait: the cycle waits for its walk to publish it (a volume with a sizeLimit, or any
	// when there is no slow cadence).
	Wait bool
	// floor says how it may start whatever the CPU budget's bucket holds, on its namespace's
	// part of the floor (budget.Floor).
	Floor FloorUse
	// cheap: a few stats, no walk (logs, etc-hosts): started whatever the budget holds.
	Cheap bool
	// Unchanged: vouched unchanged by its pod's change mark (State.Unchanged) and not yet
	// overdue, so it comes last, behind every other walk (Policy.SkipUnchanged false).
	Unchanged bool
}

// Policy is what Due schedules by: the collection's configuration and the CPU budget's.
type Policy struct {
	// UnlimitedInterval is the slow cadence of volumes without a sizeLimit, and what bounds
	// any wait (--collection.unlimited-interval); 0: every volume every cycle.
	UnlimitedInterval time.Duration
	// Tolerance is how early a walk at a cadence may come (half a cycle).
	Tolerance time.Duration
	// Costly is what the budget's bucket saves up, and Share the share of a core it fills at;
	// Costly 0: no budget, no floor.
	Costly time.Duration
	Share  float64
	// SkipUnchanged: a part vouched unchanged is not due at all until it is overdue, instead
	// of coming last (--collection.change-signal.skip-unchanged).
	SkipUnchanged bool
}

// FloorUse is how a due walk may draw on its namespace's part of the floor.
type FloorUse uint8

const (
	// NoFloor: on the bucket's credit only.
	NoFloor FloorUse = iota
	// FloorFirst: overdue, started on its namespace's part; that part spent, behind the
	// cycle's other walks, on the bucket's credit.
	FloorFirst
	// FloorAfter: costly, started on a full bucket, else on a full part of its namespace's.
	FloorAfter
)

// Due returns the parts of pods to walk in a cycle starting at now, most urgent first: the
// never measured, then the overdue (longest waiting first), then the guarded ones (a sizeLimit,
// or a pod or container limit) nearest to their limit, then, in the background, those at a
// slow cadence and those vouched unchanged. A part whose walk is in flight is not due. Under a
// budget (Policy.Costly > 0) each Walk also says what credit it needs (Cost) and how it may use
// its namespace's part of the floor (budget.Floor), so that a budget too small for every walk defers
// without starving any namespace. The rules and the bounds they give are in docs/exporter.md,
// "How a cycle orders its walks".
func Due(pods []part.Pod, state func(part.Key) State, now time.Time, policy Policy) []Walk {
	unlimitedInterval, tolerance, costly, share := policy.UnlimitedInterval, policy.Tolerance, policy.Costly, policy.Share
	type candidate struct {
		Walk
		tier    int       // 0 never measured (and not overdue), 1 overdue, 2 by urgency; unlimited on time: none
		urgency float64   // limited: usage/limit
		started time.Time // when its last walk started; overdue: since when it waits (waitingSince)
	}
	since := func(s State, d time.Duration) bool { // its last walk started d ago or more
		return !now.Add(tolerance).Before(s.Started.Add(d))
	}
	slow := func(s State) bool { return s.Started.IsZero() || since(s, unlimitedInterval) }
	waited := func(s State, d time.Duration) bool { // since its last walk (or, none, it was first seen)
		if s.Started.IsZero() {
			s.Started = s.Seen
		}
		return unlimitedInterval > 0 && !s.Started.IsZero() && since(s, d)
	}
	// overdue: a volume no limit guards
	overdue := func(s State) bool { return waited(s, 2*unlimitedInterval) }
	// waitingSince: when its last walk started or, none, when it was first seen: overdue walks
	// take their namespace's floor part in this order, so that none waits for one that began
	// waiting later (a new pod's part, or a walk that never completes and so is never measured).
	waitingSince := func(s State) time.Time {
		if s.Started.IsZero() {
			return s.Seen
		}
		return s.Started
	}
	// earning: a costly part (its last walk cost more than the bucket saves up) whose last walk
	// the budget's share has not yet earned back.
	earning := func(s State) bool {
		return costly > 0 && s.Cost > costly && !since(s, time.Duration(float64(s.Cost)/share))
	}
	// limited with the overdue ones; unlimited at their cadence; vouched unchanged last.
	var limited, unlimited, unchanged []candidate
	for _, p := range pods {
		podUsed := storageUsedBefore(p, state)
		for _, v := range p.Parts {
			k := part.Key{UID: p.UID, Name: v.Name}
			s := state(k)
			if s.InFlight {
				continue
			}
			// Vouched unchanged by the kernel: last, or not at all, before it is overdue, which
			// bounds what the change marks cannot see (change.Signal).
			if s.Unchanged && s.Measured && unlimitedInterval > 0 && !v.Kind.Cheap() && !since(s, unlimitedInterval) {
				if !policy.SkipUnchanged && !earning(s) {
					unchanged = append(unchanged, candidate{Walk: Walk{Pod: p, Volume: v, Key: k, Cost: s.Cost,
						Background: true, Unchanged: true}, started: s.Started})
				}
				continue
			}
			limit := v.Guard()
			// A part guarded only by a pod or container limit that its pod is far from (by the
			// last walks) goes behind the rest, walked every cycle on credit that covers it (and
			// at least every unlimitedInterval, as overdue, as every guarded part): under a budget
			// too small for every walk, the volumes with a sizeLimit and the pods near their limits
			// keep their cadence.
			far := costly > 0 && v.LimitBytes == nil && limit != nil && s.Measured && float64(podUsed) < farShare*float64(*limit) && !v.Kind.Cheap()
			if far {
				limit = nil
			}
			c := candidate{Walk: Walk{Pod: p, Volume: v, Key: k, Wait: limit != nil || unlimitedInterval == 0},
				started: s.Started}
			switch {
			case limit == nil && (overdue(s) || far && waited(s, unlimitedInterval)):
				c.tier, c.started = 1, waitingSince(s)
				if costly > 0 {
					c.Floor = FloorFirst
				}
				limited = append(limited, c)
			case limit != nil:
				switch {
				case !s.Measured && !waited(s, unlimitedInterval):
					c.tier = 0
				case !s.Measured || unlimitedInterval > 0 && slow(s):
					// Overdue, never measured included: first seen (or its last walk, which did
					// not complete, started) unlimitedInterval ago.
					c.tier, c.started = 1, waitingSince(s)
				default:
					c.tier, c.urgency = 2, float64(s.UsedBytes)/float64(*limit)
				}
				if v.Kind.Cheap() {
					c.Cheap = costly > 0 // a few stats, no walk: never held for credit
					limited = append(limited, c)
					continue
				}
				if costly > 0 && s.Cost > costly {
					if earning(s) {
						continue
					}
					c.Cost, c.Floor = s.Cost, FloorAfter
				} else if costly > 0 && c.tier == 1 {
					c.Floor = FloorFirst
				}
				limited = append(limited, c)
			case far || slow(s):
				c.Cost, c.Background = s.Cost, unlimitedInterval > 0
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
	longestUnwalked := func(a, b candidate) int { return a.started.Compare(b.started) }
	slices.SortStableFunc(unlimited, longestUnwalked)
	slices.SortStableFunc(unchanged, longestUnwalked)
	out := make([]Walk, 0, len(limited)+len(unlimited)+len(unchanged))
	for _, c := range slices.Concat(limited, unlimited, unchanged) {
		out = append(out, c.Walk)
	}
	return out
}

// farShare is the share of its ephemeral-storage limit under which a pod's parts without a
// sizeLimit of their own walk behind the rest when the CPU budget is short (Due).
const farShare = 0.5

// storageUsedBefore adds up what the last walks of pod p's parts found, the parts its
// ephemeral-storage usage counts (memory and huge-page volumes left out): an upper estimate of
// a container's usage too, since it holds the pod's.
func storageUsedBefore(p part.Pod, state func(part.Key) State) int64 {
	if p.Storage == nil {
		return 0
	}
	var used int64
	for _, v := range p.Parts {
		if v.Kind == part.KindEmptyDir && v.Medium != part.MediumDisk {
			continue
		}
		if s := state(part.Key{UID: p.UID, Name: v.Name}); s.Measured {
			used += s.UsedBytes
		}
	}
	return used
}
