package exporter

import (
	"slices"
	"testing"
	"time"

	"github.com/emptydir-guard/emptydir-guard/exporter/volume"
)

func limit(b int64) *int64 { return &b }

// t0 is the moment the tests of package exporter start at.
var t0 = time.Date(2026, 12, 2, 17, 0, 0, 0, time.UTC)

// volumes builds one pod per volume name; a name in limits gets that sizeLimit.
func volumes(limits map[string]int64, names ...string) []volume.PodVolumes {
	var out []volume.PodVolumes
	for _, n := range names {
		v := volume.Volume{Name: n, Medium: volume.MediumDisk}
		if l, ok := limits[n]; ok {
			v.LimitBytes = limit(l)
		}
		out = append(out, volume.PodVolumes{Namespace: "ns", Pod: "pod-" + n, UID: "uid-" + n, Volumes: []volume.Volume{v}})
	}
	return out
}

func TestDueWalks(t *testing.T) {
	now := t0
	limits := map[string]int64{"full": 100, "half": 100, "empty": 100, "new": 100, "busy": 100}
	tests := []struct {
		name           string
		pods           []volume.PodVolumes
		state          map[string]volumeState
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
			state: map[string]volumeState{
				"empty": {measured: true, usedBytes: 0},
				"half":  {measured: true, usedBytes: 50},
				"full":  {measured: true, usedBytes: 130},
			},
			want: []string{"new", "full", "half", "empty"},
		},
		{
			name: "a limited volume deferred for a slow interval goes before those nearer to their limit",
			pods: volumes(limits, "half", "full", "empty", "new"),
			state: map[string]volumeState{
				"full":  {measured: true, usedBytes: 130, started: now.Add(-10 * time.Second)},
				"half":  {measured: true, usedBytes: 50, started: now.Add(-70 * time.Second)},
				"empty": {measured: true, usedBytes: 0, started: now.Add(-90 * time.Second)},
			},
			unlimitedEvery: time.Minute,
			want:           []string{"new", "empty", "half", "full"},
		},
		{
			name:  "a walk in flight is not due again",
			pods:  volumes(limits, "busy", "half", "logs"),
			state: map[string]volumeState{"busy": {inFlight: true}, "logs": {inFlight: true}, "half": {measured: true, usedBytes: 50}},
			want:  []string{"half"},
		},
		{
			name: "unlimited at its cadence, after the limited ones, the longest unwalked first",
			pods: volumes(limits, "logs", "data", "tmp", "new-unlimited", "half"),
			state: map[string]volumeState{
				"logs": {started: now.Add(-90 * time.Second), cost: 3 * time.Second, measured: true},
				"data": {started: now.Add(-61 * time.Second), cost: time.Second, measured: true},
				"tmp":  {started: now.Add(-10 * time.Second), measured: true},
				"half": {started: now.Add(-10 * time.Second), measured: true, usedBytes: 50},
			},
			unlimitedEvery: time.Minute,
			want:           []string{"half", "new-unlimited", "logs", "data"},
			wantCost:       map[string]time.Duration{"half": 0, "new-unlimited": 0, "logs": 3 * time.Second, "data": time.Second},
			wantBackground: []string{"new-unlimited", "logs", "data"},
		},
		{
			name: "unlimited overdue by twice its cadence goes with the overdue limited ones, before the nearest to its limit, on any credit",
			pods: volumes(limits, "full", "logs", "half", "new-logs", "old-new-logs", "data"),
			state: map[string]volumeState{
				"full":         {measured: true, usedBytes: 130, started: now.Add(-10 * time.Second)},
				"half":         {measured: true, usedBytes: 50, started: now.Add(-70 * time.Second)},
				"logs":         {measured: true, started: now.Add(-125 * time.Second), cost: 3 * time.Second},
				"new-logs":     {seen: now.Add(-30 * time.Second)},
				"old-new-logs": {seen: now.Add(-121 * time.Second)},
				"data":         {measured: true, started: now.Add(-61 * time.Second), cost: time.Second},
			},
			unlimitedEvery: time.Minute,
			want:           []string{"old-new-logs", "logs", "half", "full", "new-logs", "data"},
			wantCost:       map[string]time.Duration{"logs": 0, "old-new-logs": 0, "data": time.Second},
			wantBackground: []string{"new-logs", "data"},
		},
		{
			name:           "tolerance: the cycle nearest to the cadence walks it, not the next one",
			pods:           volumes(nil, "early", "too-early"),
			state:          map[string]volumeState{"early": {started: now.Add(-59990 * time.Millisecond)}, "too-early": {started: now.Add(-54 * time.Second)}},
			unlimitedEvery: time.Minute,
			tolerance:      5 * time.Second,
			want:           []string{"early"},
			wantBackground: []string{"early"},
		},
		{
			name:  "no cadence: every volume every cycle",
			pods:  volumes(nil, "a", "b"),
			state: map[string]volumeState{"a": {started: now.Add(-time.Second)}, "b": {started: now}},
			want:  []string{"a", "b"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			state := func(k volumeKey) volumeState { return tc.state[k.volume] }
			due := dueWalks(tc.pods, state, now, tc.unlimitedEvery, tc.tolerance, 0, 0)
			var got []string
			for _, d := range due {
				got = append(got, d.vol.Name)
				if want, ok := tc.wantCost[d.vol.Name]; ok && d.cost != want {
					t.Errorf("%s: cost %v, want %v", d.vol.Name, d.cost, want)
				}
				if d.background != slices.Contains(tc.wantBackground, d.vol.Name) {
					t.Errorf("%s: background %v, want %v", d.vol.Name, d.background, !d.background)
				}
				if wantWait := d.vol.LimitBytes != nil || tc.unlimitedEvery == 0; d.wait != wantWait {
					t.Errorf("%s: the cycle waits for it: %v, want %v", d.vol.Name, d.wait, wantWait)
				}
				if d.key != (volumeKey{d.pod.UID, d.vol.Name}) {
					t.Errorf("%s: key %v does not name its pod and volume", d.vol.Name, d.key)
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
	pod := func(uid string, used int64) (volume.PodVolumes, map[volumeKey]volumeState) {
		l := limit(100)
		p := volume.PodVolumes{Namespace: "ns", Pod: uid, UID: uid, Storage: &volume.PodStorage{LimitBytes: l}, Volumes: []volume.Volume{
			{Name: "data", Medium: volume.MediumDisk, BudgetBytes: l},
			{Name: "shm", Medium: volume.MediumMemory}, // no ephemeral storage: not counted
			{Name: "container/app/writable-layer", Kind: volume.KindWritableLayer, Container: "app", BudgetBytes: l},
			{Name: "container/app/logs", Kind: volume.KindContainerLogs, Container: "app", BudgetBytes: l},
		}}
		st := map[volumeKey]volumeState{
			{uid, "data"}:                         {measured: true, usedBytes: used, started: now.Add(-10 * time.Second), cost: 3 * time.Millisecond},
			{uid, "shm"}:                          {measured: true, usedBytes: 1000, started: now.Add(-10 * time.Second)},
			{uid, "container/app/writable-layer"}: {measured: true, usedBytes: 1, started: now.Add(-10 * time.Second), cost: time.Millisecond},
			{uid, "container/app/logs"}:           {measured: true, usedBytes: 1, started: now.Add(-10 * time.Second)},
		}
		return p, st
	}
	far, farState := pod("far", 40)
	near, nearState := pod("near", 60)
	sized := volumes(map[string]int64{"sized": 100}, "sized")[0]
	state := func(k volumeKey) volumeState {
		if s, ok := farState[k]; ok {
			return s
		}
		if s, ok := nearState[k]; ok {
			return s
		}
		return volumeState{measured: true, usedBytes: 10, started: now.Add(-10 * time.Second)}
	}
	pods := []volume.PodVolumes{far, near, sized}

	due := dueWalks(pods, state, now, time.Minute, 0, time.Second, 0.05)
	var order []string
	for _, d := range due {
		order = append(order, d.pod.UID+"/"+d.vol.Name)
		logs := d.vol.Kind == volume.KindContainerLogs
		if logs != d.cheap || d.floor != noFloor {
			t.Errorf("%s/%s: cheap %v, floor %v; want the logs, a few stats, never held for credit, and nothing overdue", d.pod.UID, d.vol.Name, d.cheap, d.floor)
		}
		isFar := d.pod.UID == "far" && !logs
		if d.background != isFar || d.wait == isFar {
			t.Errorf("%s/%s: background %v, waited for %v; want a far pod's part in the background, the others waited for", d.pod.UID, d.vol.Name, d.background, d.wait)
		}
		if isFar && d.cost != state(d.key).cost {
			t.Errorf("%s: cost %v, want its last walk's %v (walked on credit that covers it)", d.vol.Name, d.cost, state(d.key).cost)
		}
	}
	want := []string{"near/data", "uid-sized/sized", "far/container/app/logs", "near/container/app/writable-layer",
		"near/container/app/logs", "far/data", "far/container/app/writable-layer"}
	if !slices.Equal(order, want) {
		t.Errorf("due %v, want %v", order, want)
	}

	// Without a budget nothing is short: the far pod's parts are guarded as the others.
	for _, d := range dueWalks(pods, state, now, time.Minute, 0, 0, 0) {
		if d.background || !d.wait {
			t.Errorf("no budget: %s/%s in the background", d.pod.UID, d.vol.Name)
		}
	}
}

// Under a budget, every overdue walk may start on its namespace's part of the floor, whatever
// the bucket holds: a guarded part not walked (or, never walked, first seen)
// --collection.unlimited-interval ago, any other part twice that, a pod's part far from its
// limit too; a costly volume once it has earned its walk, after the bucket; nothing else.
func TestDueWalksFloor(t *testing.T) {
	now := t0
	podLimit := limit(100)
	far := volume.PodVolumes{Namespace: "far", Pod: "far", UID: "far", Storage: &volume.PodStorage{LimitBytes: podLimit}, Volumes: []volume.Volume{
		{Name: "far-recent", Medium: volume.MediumDisk, BudgetBytes: podLimit},
		{Name: "far-overdue", Medium: volume.MediumDisk, BudgetBytes: podLimit},
	}}
	pods := append(volumes(map[string]int64{"sized": 100, "sized-slow": 100, "new": 100, "new-old": 100, "costly": 100, "costly-early": 100},
		"sized", "sized-slow", "new", "new-old", "costly", "costly-early", "logs", "logs-overdue", "logs-new-old"), far)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	state := map[string]volumeState{
		"sized":        {measured: true, usedBytes: 10, started: ago(10 * time.Second)},
		"sized-slow":   {measured: true, usedBytes: 10, started: ago(time.Minute)},
		"new":          {seen: ago(50 * time.Second)},
		"new-old":      {seen: ago(time.Minute)},
		"costly":       {measured: true, usedBytes: 10, started: ago(5 * time.Minute), cost: 12 * time.Second},
		"costly-early": {measured: true, usedBytes: 10, started: ago(3 * time.Minute), cost: 12 * time.Second},
		"logs":         {measured: true, started: ago(70 * time.Second)},
		"logs-overdue": {measured: true, started: ago(2 * time.Minute)},
		"logs-new-old": {seen: ago(2 * time.Minute)},
		"far-recent":   {measured: true, usedBytes: 10, started: ago(70 * time.Second), cost: time.Millisecond},
		"far-overdue":  {measured: true, usedBytes: 10, started: ago(2 * time.Minute), cost: time.Millisecond},
	}
	want := map[string]floorUse{
		"sized": noFloor, "sized-slow": floorFirst, "new": noFloor, "new-old": floorFirst,
		"costly": floorAfter, "logs": noFloor, "logs-overdue": floorFirst, "logs-new-old": floorFirst,
		"far-recent": noFloor, "far-overdue": floorFirst,
	} // costly-early: not due (12 CPU-s take 4 minutes to earn at 5 %)
	due := dueWalks(pods, func(k volumeKey) volumeState { return state[k.volume] }, now, time.Minute, 0, 3*time.Second, 0.05)
	got := map[string]floorUse{}
	for _, d := range due {
		got[d.vol.Name] = d.floor
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
	for _, d := range dueWalks(pods, func(k volumeKey) volumeState { return state[k.volume] }, now, time.Minute, 0, 0, 0) {
		if d.floor != noFloor {
			t.Errorf("no budget: %s on the floor", d.vol.Name)
		}
	}
}
