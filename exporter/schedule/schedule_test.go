package schedule

import (
	"slices"
	"testing"
	"time"

	"github.com/emptydir-guard/emptydir-guard/exporter/exportertest"
	"github.com/emptydir-guard/emptydir-guard/exporter/part"
)

func limit(b int64) *int64 { return &b }

// t0 is the moment the tests of package schedule start at.
var t0 = time.Date(2026, 12, 2, 17, 0, 0, 0, time.UTC)

// volumes builds one pod per volume name; a name in limits gets that sizeLimit.
var volumes = exportertest.PodPerVolume

func TestDueWalks(t *testing.T) {
	now := t0
	limits := map[string]int64{"full": 100, "half": 100, "empty": 100, "new": 100, "busy": 100}
	tests := []struct {
		name           string
		pods           []part.Pod
		state          map[string]State
		unlimitedEvery time.Duration
		tolerance      time.Duration
		want           []string
		wantCost       map[string]time.Duration
		// wantBackground: the walks the cycle neither dispatches itself nor waits for
		wantBackground []string
	}{
		{
			name: "limited nearest to the limit first, never measured before all",
			pods: volumes(limits, "empty", "half", "new", "full"),
			state: map[string]State{
				"empty": {Measured: true, UsedBytes: 0},
				"half":  {Measured: true, UsedBytes: 50},
				"full":  {Measured: true, UsedBytes: 130},
			},
			want: []string{"new", "full", "half", "empty"},
		},
		{
			name: "a limited volume deferred for a slow interval goes before those nearer to their limit",
			pods: volumes(limits, "half", "full", "empty", "new"),
			state: map[string]State{
				"full":  {Measured: true, UsedBytes: 130, Started: now.Add(-10 * time.Second)},
				"half":  {Measured: true, UsedBytes: 50, Started: now.Add(-70 * time.Second)},
				"empty": {Measured: true, UsedBytes: 0, Started: now.Add(-90 * time.Second)},
			},
			unlimitedEvery: time.Minute,
			want:           []string{"new", "empty", "half", "full"},
		},
		{
			// A part whose walks never complete is never measured: it used to go before every
			// overdue part, and could hold its namespace's part of the floor for good.
			name: "a part never measured that waited the slow interval is overdue, ranked by how long it waited",
			pods: volumes(map[string]int64{"full": 100, "half": 100, "stuck": 100, "new": 100}, "full", "half", "stuck", "new"),
			state: map[string]State{
				"full":  {Measured: true, UsedBytes: 130, Started: now.Add(-10 * time.Second)},
				"half":  {Measured: true, UsedBytes: 50, Started: now.Add(-70 * time.Second)},
				"stuck": {Seen: now.Add(-5 * time.Minute), Started: now.Add(-61 * time.Second)},
				"new":   {Seen: now.Add(-30 * time.Second)},
			},
			unlimitedEvery: time.Minute,
			want:           []string{"new", "half", "stuck", "full"},
		},
		{
			name:  "a walk in flight is not due again",
			pods:  volumes(limits, "busy", "half", "logs"),
			state: map[string]State{"busy": {InFlight: true}, "logs": {InFlight: true}, "half": {Measured: true, UsedBytes: 50}},
			want:  []string{"half"},
		},
		{
			name: "unlimited at its cadence, after the limited ones, the longest unwalked first",
			pods: volumes(limits, "logs", "data", "tmp", "new-unlimited", "half"),
			state: map[string]State{
				"logs": {Started: now.Add(-90 * time.Second), Cost: 3 * time.Second, Measured: true},
				"data": {Started: now.Add(-61 * time.Second), Cost: time.Second, Measured: true},
				"tmp":  {Started: now.Add(-10 * time.Second), Measured: true},
				"half": {Started: now.Add(-10 * time.Second), Measured: true, UsedBytes: 50},
			},
			unlimitedEvery: time.Minute,
			want:           []string{"half", "new-unlimited", "logs", "data"},
			wantCost:       map[string]time.Duration{"half": 0, "new-unlimited": 0, "logs": 3 * time.Second, "data": time.Second},
			wantBackground: []string{"new-unlimited", "logs", "data"},
		},
		{
			// Overdue ones the longest waiting first: since their last walk started or, never
			// walked, since they were first seen.
			name: "unlimited overdue by twice its cadence goes with the overdue limited ones, before the nearest to its limit, on any credit",
			pods: volumes(limits, "full", "logs", "half", "new-logs", "old-new-logs", "data"),
			state: map[string]State{
				"full":         {Measured: true, UsedBytes: 130, Started: now.Add(-10 * time.Second)},
				"half":         {Measured: true, UsedBytes: 50, Started: now.Add(-70 * time.Second)},
				"logs":         {Measured: true, Started: now.Add(-125 * time.Second), Cost: 3 * time.Second},
				"new-logs":     {Seen: now.Add(-30 * time.Second)},
				"old-new-logs": {Seen: now.Add(-121 * time.Second)},
				"data":         {Measured: true, Started: now.Add(-61 * time.Second), Cost: time.Second},
			},
			unlimitedEvery: time.Minute,
			want:           []string{"logs", "old-new-logs", "half", "full", "new-logs", "data"},
			wantCost:       map[string]time.Duration{"logs": 0, "old-new-logs": 0, "data": time.Second},
			wantBackground: []string{"new-logs", "data"},
		},
		{
			name:           "tolerance: the cycle nearest to the cadence walks it, not the next one",
			pods:           volumes(nil, "early", "too-early"),
			state:          map[string]State{"early": {Started: now.Add(-59990 * time.Millisecond)}, "too-early": {Started: now.Add(-54 * time.Second)}},
			unlimitedEvery: time.Minute,
			tolerance:      5 * time.Second,
			want:           []string{"early"},
			wantBackground: []string{"early"},
		},
		{
			name:  "no cadence: every volume every cycle",
			pods:  volumes(nil, "a", "b"),
			state: map[string]State{"a": {Started: now.Add(-time.Second)}, "b": {Started: now}},
			want:  []string{"a", "b"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			state := func(k part.Key) State { return tc.state[k.Name] }
			due := Due(tc.pods, state, now, Policy{UnlimitedInterval: tc.unlimitedEvery, Tolerance: tc.tolerance})
			var got []string
			for _, d := range due {
				got = append(got, d.Volume.Name)
				if want, ok := tc.wantCost[d.Volume.Name]; ok && d.Cost != want {
					t.Errorf("%s: cost %v, want %v", d.Volume.Name, d.Cost, want)
				}
				if d.Background != slices.Contains(tc.wantBackground, d.Volume.Name) {
					t.Errorf("%s: background %v, want %v", d.Volume.Name, d.Background, !d.Background)
				}
				if wantWait := d.Volume.LimitBytes != nil || tc.unlimitedEvery == 0; d.Wait != wantWait {
					t.Errorf("%s: the cycle waits for it: %v, want %v", d.Volume.Name, d.Wait, wantWait)
				}
				if d.Key != (part.Key{UID: d.Pod.UID, Name: d.Volume.Name}) {
					t.Errorf("%s: key %v does not name its pod and volume", d.Volume.Name, d.Key)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("due %v, want %v", got, tc.want)
			}
		})
	}
}

// Under a CPU budget, the parts of a pod far from its ephemeral-storage limit (below half of
// it, by their last walks) go behind the volumes with a sizeLimit and the pods near their
// limits, each walked every cycle on credit that covers it; near half, or without a budget,
// they are guarded as a sizeLimit is.
func TestDueWalksPodFarFromItsLimit(t *testing.T) {
	now := t0
	pod := func(uid string, used int64) (part.Pod, map[part.Key]State) {
		l := limit(100)
		p := part.Pod{Namespace: "ns", Pod: uid, UID: uid, Storage: &part.PodStorage{LimitBytes: l}, Parts: []part.Part{
			{Name: "data", Medium: part.MediumDisk, BudgetBytes: l},
			{Name: "shm", Medium: part.MediumMemory}, // no ephemeral storage: not counted
			{Name: "container/app/writable-layer", Kind: part.KindWritableLayer, Container: "app", BudgetBytes: l},
			{Name: "container/app/logs", Kind: part.KindContainerLogs, Container: "app", BudgetBytes: l},
		}}
		st := map[part.Key]State{
			{UID: uid, Name: "data"}:                         {Measured: true, UsedBytes: used, Started: now.Add(-10 * time.Second), Cost: 3 * time.Millisecond},
			{UID: uid, Name: "shm"}:                          {Measured: true, UsedBytes: 1000, Started: now.Add(-10 * time.Second)},
			{UID: uid, Name: "container/app/writable-layer"}: {Measured: true, UsedBytes: 1, Started: now.Add(-10 * time.Second), Cost: time.Millisecond},
			{UID: uid, Name: "container/app/logs"}:           {Measured: true, UsedBytes: 1, Started: now.Add(-10 * time.Second)},
		}
		return p, st
	}
	far, farState := pod("far", 40)
	near, nearState := pod("near", 60)
	sized := volumes(map[string]int64{"sized": 100}, "sized")[0]
	state := func(k part.Key) State {
		if s, ok := farState[k]; ok {
			return s
		}
		if s, ok := nearState[k]; ok {
			return s
		}
		return State{Measured: true, UsedBytes: 10, Started: now.Add(-10 * time.Second)}
	}
	pods := []part.Pod{far, near, sized}

	due := Due(pods, state, now, Policy{UnlimitedInterval: time.Minute, Costly: time.Second, Share: 0.05})
	var order []string
	for _, d := range due {
		order = append(order, d.Pod.UID+"/"+d.Volume.Name)
		logs := d.Volume.Kind == part.KindContainerLogs
		if logs != d.Cheap || d.Floor != NoFloor {
			t.Errorf("%s/%s: cheap %v, floor %v; want the logs, a few stats, never held for credit, and nothing overdue", d.Pod.UID, d.Volume.Name, d.Cheap, d.Floor)
		}
		isFar := d.Pod.UID == "far" && !logs
		if d.Background != isFar || d.Wait == isFar {
			t.Errorf("%s/%s: background %v, waited for %v; want a far pod's part in the background, the others waited for", d.Pod.UID, d.Volume.Name, d.Background, d.Wait)
		}
		if isFar && d.Cost != state(d.Key).Cost {
			t.Errorf("%s: cost %v, want its last walk's %v (walked on credit that covers it)", d.Volume.Name, d.Cost, state(d.Key).Cost)
		}
	}
	want := []string{"near/data", "uid-sized/sized", "far/container/app/logs", "near/container/app/writable-layer",
		"near/container/app/logs", "far/data", "far/container/app/writable-layer"}
	if !slices.Equal(order, want) {
		t.Errorf("due %v, want %v", order, want)
	}

	// Without a budget nothing is short: the far pod's parts are guarded as the others.
	for _, d := range Due(pods, state, now, Policy{UnlimitedInterval: time.Minute}) {
		if d.Background || !d.Wait {
			t.Errorf("no budget: %s/%s in the background", d.Pod.UID, d.Volume.Name)
		}
	}
}

// Under a budget, every overdue walk may start on its namespace's part of the floor, whatever
// the bucket holds: a guarded part not walked (or, never walked, first seen)
// --collection.unlimited-interval ago, a pod's part far from its limit included (it used to
// wait twice that: issue 37, item 8), any other part twice that; a costly volume once it has
// earned its walk, after the bucket; nothing else.
func TestDueWalksFloor(t *testing.T) {
	now := t0
	podLimit := limit(100)
	far := part.Pod{Namespace: "far", Pod: "far", UID: "far", Storage: &part.PodStorage{LimitBytes: podLimit}, Parts: []part.Part{
		{Name: "far-recent", Medium: part.MediumDisk, BudgetBytes: podLimit},
		{Name: "far-slow", Medium: part.MediumDisk, BudgetBytes: podLimit},
		{Name: "far-overdue", Medium: part.MediumDisk, BudgetBytes: podLimit},
	}}
	pods := append(volumes(map[string]int64{"sized": 100, "sized-slow": 100, "new": 100, "new-old": 100, "costly": 100, "costly-early": 100},
		"sized", "sized-slow", "new", "new-old", "costly", "costly-early", "logs", "logs-overdue", "logs-new-old"), far)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	state := map[string]State{
		"sized":        {Measured: true, UsedBytes: 10, Started: ago(10 * time.Second)},
		"sized-slow":   {Measured: true, UsedBytes: 10, Started: ago(time.Minute)},
		"new":          {Seen: ago(50 * time.Second)},
		"new-old":      {Seen: ago(time.Minute)},
		"costly":       {Measured: true, UsedBytes: 10, Started: ago(5 * time.Minute), Cost: 12 * time.Second},
		"costly-early": {Measured: true, UsedBytes: 10, Started: ago(3 * time.Minute), Cost: 12 * time.Second},
		"logs":         {Measured: true, Started: ago(70 * time.Second)},
		"logs-overdue": {Measured: true, Started: ago(2 * time.Minute)},
		"logs-new-old": {Seen: ago(2 * time.Minute)},
		"far-recent":   {Measured: true, UsedBytes: 10, Started: ago(50 * time.Second), Cost: time.Millisecond},
		"far-slow":     {Measured: true, UsedBytes: 10, Started: ago(70 * time.Second), Cost: time.Millisecond},
		"far-overdue":  {Measured: true, UsedBytes: 10, Started: ago(2 * time.Minute), Cost: time.Millisecond},
	}
	want := map[string]FloorUse{
		"sized": NoFloor, "sized-slow": FloorFirst, "new": NoFloor, "new-old": FloorFirst,
		"costly": FloorAfter, "logs": NoFloor, "logs-overdue": FloorFirst, "logs-new-old": FloorFirst,
		"far-recent": NoFloor, "far-slow": FloorFirst, "far-overdue": FloorFirst,
	} // costly-early: not due (12 CPU-s take 4 minutes to earn at 5 %)
	due := Due(pods, func(k part.Key) State { return state[k.Name] }, now, Policy{UnlimitedInterval: time.Minute, Costly: 3 * time.Second, Share: 0.05})
	got := map[string]FloorUse{}
	for _, d := range due {
		got[d.Volume.Name] = d.Floor
	}
	for name, w := range want {
		if g, ok := got[name]; !ok || g != w {
			t.Errorf("%s: due %v, floor %d; want due, floor %d", name, ok, g, w)
		}
	}
	if _, ok := got["costly-early"]; ok || len(got) != len(want) {
		t.Errorf("due %v, want %d walks and not costly-early", got, len(want))
	}
	// Without a budget there is no floor.
	for _, d := range Due(pods, func(k part.Key) State { return state[k.Name] }, now, Policy{UnlimitedInterval: time.Minute}) {
		if d.Floor != NoFloor {
			t.Errorf("no budget: %s on the floor", d.Volume.Name)
		}
	}
}

// A part its pod's change mark vouches unchanged comes last, behind every other due walk (the
// slow cadence's included), the longest unwalked first, in the background on credit that covers
// its last walk; overdue, it is ranked as any other; a costly one waits until it has earned its
// walk; with SkipUnchanged, none is due before it is overdue.
func TestDueUnchangedLast(t *testing.T) {
	now := t0
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	limits := map[string]int64{"quiet": 100, "quieter": 100, "writer": 100, "overdue": 100, "costly": 100}
	pods := volumes(limits, "quiet", "quieter", "writer", "overdue", "costly", "slow", "unlimited-quiet")
	state := map[string]State{
		"quiet":           {Measured: true, UsedBytes: 90, Started: ago(20 * time.Second), Cost: time.Millisecond, Unchanged: true},
		"quieter":         {Measured: true, UsedBytes: 10, Started: ago(30 * time.Second), Cost: 2 * time.Millisecond, Unchanged: true},
		"writer":          {Measured: true, UsedBytes: 10, Started: ago(5 * time.Second)},
		"overdue":         {Measured: true, UsedBytes: 10, Started: ago(time.Minute), Unchanged: true},
		"costly":          {Measured: true, UsedBytes: 99, Started: ago(50 * time.Second), Cost: 12 * time.Second, Unchanged: true},
		"slow":            {Measured: true, UsedBytes: 10, Started: ago(time.Minute), Cost: 3 * time.Millisecond},
		"unlimited-quiet": {Measured: true, UsedBytes: 10, Started: ago(40 * time.Second), Cost: 4 * time.Millisecond, Unchanged: true},
	}
	for _, tc := range []struct {
		name   string
		policy Policy
		want   []string
	}{
		{"budget", Policy{UnlimitedInterval: time.Minute, Costly: 3 * time.Second, Share: 0.05},
			[]string{"overdue", "writer", "slow", "unlimited-quiet", "quieter", "quiet"}},
		{"no budget", Policy{UnlimitedInterval: time.Minute},
			[]string{"overdue", "writer", "slow", "costly", "unlimited-quiet", "quieter", "quiet"}},
		{"skip unchanged", Policy{UnlimitedInterval: time.Minute, Costly: 3 * time.Second, Share: 0.05, SkipUnchanged: true},
			[]string{"overdue", "writer", "slow"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, d := range Due(pods, func(k part.Key) State { return state[k.Name] }, now, tc.policy) {
				got = append(got, d.Volume.Name)
				s := state[d.Volume.Name]
				last := s.Unchanged && d.Volume.Name != "overdue"
				if d.Unchanged != last || last && (!d.Background || d.Wait || d.Cost != s.Cost || d.Floor != NoFloor) {
					t.Errorf("%s: unchanged %v, background %v, waited for %v, cost %v, floor %d; want unchanged %v, and if so in the background, not waited for, on its last walk's cost %v, no floor",
						d.Volume.Name, d.Unchanged, d.Background, d.Wait, d.Cost, d.Floor, last, s.Cost)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("due %v, want %v", got, tc.want)
			}
		})
	}
}
