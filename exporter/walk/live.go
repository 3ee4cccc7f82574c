package walk

import (
	"slices"
	"strings"
	"time"

	"github.com/emptydir-guard/emptydir-guard/exporter/part"
)

// Source is the Measurer the engine walks, which a live walk measures with too.
func (w *Engine) Source() part.Measurer { return w.cfg.Source }

// BeginLive hands the volumes keys to a live walk that is about to start. A periodic walk
// of them in flight is cancelled, since the live walk redoes its work and both would share
// the node's CPU and disk (a big volume's live walk could then outlast its bound), and none
// starts until the live walk ends. end records the live walk's successful results as the
// volumes' latest measurement, which the next cycle publishes, and what their walks cost
// (costs), sets their IncompleteSince from the volumes' run of lower bounds
// (volumeRecord.noteWalk), and gives the volumes back. With budgetCut (the walk exhausted its
// caller's live CPU budget), a result cut short is no evidence about its volume, only about
// the caller's budget: it is answered, but neither recorded nor part of the volume's run.
func (w *Engine) BeginLive(keys []part.Key) (end func(results []part.Result, costs map[part.Key]time.Duration, budgetCut bool)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	mine := map[part.Key]*inflight{}
	for _, k := range keys {
		f := w.running[k]
		if f != nil && f.cancel == nil {
			continue // another live walk has it: both measure, that one records
		}
		if f != nil {
			f.cancel()
		}
		mine[k] = &inflight{}
		w.running[k] = mine[k]
	}
	return func(results []part.Result, costs map[part.Key]time.Duration, budgetCut bool) {
		w.mu.Lock()
		defer w.mu.Unlock()
		for i, r := range results {
			k := part.Key{UID: r.UID, Name: r.Part.Name}
			_, own := mine[k]
			switch {
			case r.Err != nil:
			case own && budgetCut && r.Measurement.CutShort:
				// Evidence of the caller's budget, not of the volume: answered, not recorded.
				// What it spent is the least its next walk costs.
				rec := w.record(k)
				rec.liveCost = max(costs[k], rec.liveCost)
				results[i].IncompleteSince = part.IncompleteSince(rec.incompleteSince, r.Measurement)
			case own:
				rec := w.record(k)
				rec.noteWalk(&results[i])
				r = results[i]
				rec.latest = &r
				rec.UsedBytes, rec.Measured = r.Measurement.UsedBytes, true
				rec.mark, rec.unchangedAt = nil, time.Time{} // no mark was read before it
				if cost, ok := costs[k]; ok {
					if r.Measurement.CutShort { // it would have cost more: what it spent is a lower bound
						cost = max(cost, rec.liveCost)
					}
					rec.liveCost = cost
				}
			default:
				// Another live walk records this volume: this one continues its run unrecorded.
				var prev time.Time
				if rec := w.volumes[k]; rec != nil {
					prev = rec.incompleteSince
				}
				results[i].IncompleteSince = part.IncompleteSince(prev, r.Measurement)
			}
		}
		for k, f := range mine {
			if w.running[k] == f {
				delete(w.running, k)
			}
		}
	}
}

// LiveEstimate is what a live walk of the volumes keys is expected to cost: for each, what its
// last live walk cost, else its last periodic walk; 0 for those never walked.
func (w *Engine) LiveEstimate(keys []part.Key) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	var total time.Duration
	for _, k := range keys {
		rec := w.volumes[k]
		switch {
		case rec == nil:
		case rec.liveCost > 0:
			total += rec.liveCost
		case rec.Measured:
			total += rec.Cost
		}
	}
	return total
}

// Latest is the result of volume k's last completed walk, which the next cycle publishes;
// false when none has completed.
func (w *Engine) Latest(k part.Key) (part.Result, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if rec := w.volumes[k]; rec != nil && rec.latest != nil {
		return *rec.latest, true
	}
	return part.Result{}, false
}

// Running lists the volumes with a walk in flight, periodic or live, ordered by UID and name.
func (w *Engine) Running() []part.Key {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]part.Key, 0, len(w.running))
	for k := range w.running {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b part.Key) int {
		if c := strings.Compare(a.UID, b.UID); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

// SetInformerLag sets how long a walk that found its volume missing waits for the informer to
// show the pod's deletion (5 s unless set); before the first Cycle, for a lister that is never
// late.
func (w *Engine) SetInformerLag(d time.Duration) { w.informerLag = d }
