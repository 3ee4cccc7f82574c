package framework

import (
	"context"
	"time"

	"github.com/emptydir-guard/emptydir-guard/test/monitoring"
)

// FirstOver returns the first raw sample of a range result whose value exceeds v.
func FirstOver(res []monitoring.Sample, v float64) (monitoring.Point, bool) {
	var best monitoring.Point
	found := false
	for _, s := range res {
		for _, p := range s.Values {
			if p.Value > v && (!found || p.Time.Before(best.Time)) {
				best, found = p, true
			}
		}
	}
	return best, found
}

// FirstSample returns the time of the first raw sample above v of a range-selector query.
func FirstSample(ctx context.Context, mon *monitoring.Stack, expr string, v float64) (time.Time, bool) {
	res, err := mon.Query(ctx, expr)
	if err != nil {
		return time.Time{}, false
	}
	p, ok := FirstOver(res, v)
	return p.Time, ok
}
