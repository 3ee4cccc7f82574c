package walk

import (
	"errors"
	"testing"
	"time"

	"github.com/emptydir-guard/emptydir-guard/exporter/change"
	"github.com/emptydir-guard/emptydir-guard/exporter/part"
	"github.com/emptydir-guard/emptydir-guard/internal/podcgroup"
)

// TestKeepMark: only a complete walk's mark vouches for the part, so that a later cycle that
// reads the same mark finds it unchanged; a lower bound, a failed walk or a walk without a
// mark drops the mark an earlier walk kept, and a changed mark vouches for nothing.
func TestKeepMark(t *testing.T) {
	before := change.MarkOf(podcgroup.Snapshot{Version: podcgroup.V2, Cgroup: 7, WriteBytes: 4096})
	written := change.MarkOf(podcgroup.Snapshot{Version: podcgroup.V2, Cgroup: 7, WriteBytes: 8192})
	remade := change.MarkOf(podcgroup.Snapshot{Version: podcgroup.V2, Cgroup: 8, WriteBytes: 4096})
	failed := &part.MeasureError{Reason: part.ReasonNotFound, Err: errors.New("no such directory")}

	for _, tc := range []struct {
		name      string
		result    part.Result
		mark      *change.Mark // read before the walk began
		markNow   change.Mark  // read by the next cycle
		unchanged bool
	}{
		{name: "complete walk, same mark", mark: &before, markNow: before, unchanged: true},
		{name: "complete walk, the pod wrote since", mark: &before, markNow: written},
		{name: "complete walk, the cgroup made again", mark: &before, markNow: remade},
		{name: "complete walk without a mark", markNow: before},
		{name: "unreadable entries", result: lowerBound(part.Measurement{UnreadableEntries: 1}), mark: &before, markNow: before},
		{name: "directories changed during the walk", result: lowerBound(part.Measurement{ChangedDirectories: 2}), mark: &before, markNow: before},
		{name: "cut short", result: lowerBound(part.Measurement{CutShort: true}), mark: &before, markNow: before},
		{name: "unlocated", result: lowerBound(part.Measurement{Unlocated: "no layer"}), mark: &before, markNow: before},
		{name: "failed walk", result: part.Result{Err: failed}, mark: &before, markNow: before},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// An earlier complete walk kept a mark equal to markNow, and the part was found
			// unchanged since: the walk under test decides alone what is kept.
			kept := tc.markNow
			rec := volumeRecord{mark: &kept, unchangedAt: time.Unix(1, 0)}
			rec.keepMark(tc.result, tc.mark)
			if got := rec.markStill(tc.markNow); got != tc.unchanged {
				t.Errorf("markStill after the walk = %v, want %v", got, tc.unchanged)
			}
			if !rec.unchangedAt.IsZero() {
				t.Errorf("unchangedAt = %v after a walk, want zero", rec.unchangedAt)
			}
		})
	}
}

// lowerBound is a result whose measurement m is a lower bound.
func lowerBound(m part.Measurement) part.Result {
	if !m.LowerBound() {
		panic("lowerBound: a complete measurement")
	}
	return part.Result{Measurement: m}
}
