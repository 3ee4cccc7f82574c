package exporter_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/emptydir-guard/emptydir-guard/exporter"
	"github.com/emptydir-guard/emptydir-guard/exporter/change"
	"github.com/emptydir-guard/emptydir-guard/exporter/exportertest"
	"github.com/emptydir-guard/emptydir-guard/exporter/part"
	"github.com/emptydir-guard/emptydir-guard/internal/podcgroup"
)

// fakeSignal hands out each pod's mark as its cgroup would: a write count, changed by write;
// a pod in broken has no mark.
type fakeSignal struct {
	mu     sync.Mutex
	writes map[string]int
	broken map[string]error
}

func (f *fakeSignal) Mark(p part.Pod) (change.Mark, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.broken[p.UID]; err != nil {
		return change.Mark{}, err
	}
	return change.MarkOf(podcgroup.Snapshot{WriteIOs: uint64(f.writes[p.UID])}), nil
}

// Vouches for every part but those named unvouched.
func (f *fakeSignal) Vouches(v part.Part) bool { return !strings.HasPrefix(v.Name, "unvouched") }

func (f *fakeSignal) write(uid string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes[uid]++
}

// TestChangeSignalSkipsUnchangedParts: with SkipUnchanged, a pod whose mark says it wrote nothing
// since its part's last complete walk began is not walked again until that walk is
// UnlimitedInterval old; a pod
// that writes, one without a mark, and one whose last walk was a lower bound are walked every
// cycle, and so is a part the marks do not vouch for (a memory volume under cgroup v2); the skips, the marks and when each part was last vouched unchanged are published.
func TestChangeSignalSkipsUnchangedParts(t *testing.T) {
	clk := exportertest.NewClock(t0)
	lowerBound := map[string]bool{"racing": true}
	src := exportertest.NewSource(func(_ context.Context, _ part.Pod, v part.Part) (part.Measurement, error) {
		at := clk.Now()
		m := part.Measurement{UsedBytes: 10, MeasuredAt: at, CompletedAt: at}
		if lowerBound[v.Name] {
			m.ChangedDirectories = 1
		}
		return m, nil
	}).Measurer()
	limits := map[string]int64{"quiet": 100, "busy": 100, "nocgroup": 100, "racing": 100, "unvouched": 100}
	pods := exportertest.NewPods(exporter.TestVolumes(limits, "quiet", "busy", "nocgroup", "racing", "unvouched")...)
	signal := &fakeSignal{writes: map[string]int{}, broken: map[string]error{
		"uid-nocgroup": &change.Error{Reason: "not_found", Err: errors.New("no cgroup kubepods/besteffort/poduid-nocgroup")},
	}}
	e, err := exporter.New(exporter.TestConfig(exporter.Config{NodeName: "node-1", Source: src, Pods: pods, Now: clk.Now,
		UnlimitedInterval: time.Minute, VolumeConcurrency: 1, ChangeSignal: signal, SkipUnchanged: true}))
	if err != nil {
		t.Fatal(err)
	}
	// Cycles at 0, 10, ..., 70 s; busy writes between any two.
	walked := walkCycles(t, e, src, clk, 8, func() { signal.write("uid-busy") })
	every := "busy,nocgroup,racing,unvouched"
	want := []string{"busy,nocgroup,quiet,racing,unvouched", every, every, every, every, every, "quiet," + every, every}
	if strings.Join(walked, " ") != strings.Join(want, " ") {
		t.Errorf("walks per cycle\n%q, want\n%q", walked, want)
	}

	// At 80 s: quiet was walked at 60 s and vouched unchanged at 70 and 80 s.
	e.Refresh(context.Background())
	e.WaitForWalks()
	wantMetrics := `
# HELP emptydir_exporter_change_marks_total Reads of the pods' change marks, by outcome: read, or why a pod has none.
# TYPE emptydir_exporter_change_marks_total counter
emptydir_exporter_change_marks_total{node="node-1",outcome="not_found"} 9
emptydir_exporter_change_marks_total{node="node-1",outcome="read"} 36
# HELP emptydir_exporter_walks_unchanged_total Walks not started because the pod's change mark vouched the part unchanged.
# TYPE emptydir_exporter_walks_unchanged_total counter
emptydir_exporter_walks_unchanged_total{node="node-1"} 7
# HELP emptydir_measurement_age_seconds Seconds between the measurement behind this volume's values and this scrape.
# TYPE emptydir_measurement_age_seconds gauge
emptydir_measurement_age_seconds{medium="disk",namespace="ns",node="node-1",pod="pod-busy",uid="uid-busy",volume="busy"} 0
emptydir_measurement_age_seconds{medium="disk",namespace="ns",node="node-1",pod="pod-nocgroup",uid="uid-nocgroup",volume="nocgroup"} 0
emptydir_measurement_age_seconds{medium="disk",namespace="ns",node="node-1",pod="pod-quiet",uid="uid-quiet",volume="quiet"} 20
emptydir_measurement_age_seconds{medium="disk",namespace="ns",node="node-1",pod="pod-racing",uid="uid-racing",volume="racing"} 0
emptydir_measurement_age_seconds{medium="disk",namespace="ns",node="node-1",pod="pod-unvouched",uid="uid-unvouched",volume="unvouched"} 0
# HELP emptydir_measurement_unchanged_timestamp_seconds Unix time in seconds of the last cycle whose change mark vouched this measurement current.
# TYPE emptydir_measurement_unchanged_timestamp_seconds gauge
emptydir_measurement_unchanged_timestamp_seconds{medium="disk",namespace="ns",node="node-1",pod="pod-quiet",uid="uid-quiet",volume="quiet"} ` + strconv.FormatInt(t0.Add(80*time.Second).Unix(), 10) + `
`
	if err := testutil.CollectAndCompare(e, strings.NewReader(wantMetrics), "emptydir_exporter_change_marks_total",
		"emptydir_exporter_walks_unchanged_total", "emptydir_measurement_age_seconds", "emptydir_measurement_unchanged_timestamp_seconds"); err != nil {
		t.Error(err)
	}
}

// TestChangeSignalPutsUnchangedLast: without SkipUnchanged a part vouched unchanged is not
// spared but walked after the others, on what the budget has left: a budget that covers every
// walk walks it every cycle, as without the signal; one that covers only the writer's walk
// leaves it (counted unchanged, not as a shortfall of the budget) until its last walk is
// UnlimitedInterval old.
func TestChangeSignalPutsUnchangedLast(t *testing.T) {
	for _, tc := range []struct {
		name   string
		budget float64 // share of a core; each walk costs 50 ms of CPU, a cycle is 10 s
		want   []string
		// wantUnchanged and wantBudget: walks_unchanged_total, walks_deferred_total{reason="cpu_budget"}
		wantUnchanged, wantBudget int
	}{
		{name: "no budget", want: slices.Repeat([]string{"busy,quiet"}, 8)},
		{name: "a budget for every walk", budget: 0.01, want: slices.Repeat([]string{"busy,quiet"}, 8)},
		// The bucket's 50 ms take one walk a cycle. At 0 s both are new (never measured, in pod
		// order: busy first), at 10 s quiet, never measured, goes before busy; from 20 s on quiet is
		// vouched unchanged and left behind busy until its walk of 10 s is a minute old: overdue
		// at 70 s, it goes first, on the floor, and busy waits for the next cycle.
		{name: "a budget for the writer's walk only", budget: 0.005,
			want:          []string{"busy", "quiet", "busy", "busy", "busy", "busy", "busy", "quiet"},
			wantUnchanged: 5, wantBudget: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := exportertest.NewClock(t0)
			src := newCostlySource(clk, 50*time.Millisecond, map[string]int64{"quiet": 10, "busy": 10})
			pods := exportertest.NewPods(exporter.TestVolumes(map[string]int64{"quiet": 100, "busy": 100}, "quiet", "busy")...)
			signal := &fakeSignal{writes: map[string]int{}}
			cfg := exporter.Config{NodeName: "node-1", Source: src, Pods: pods, Now: clk.Now, UnlimitedInterval: time.Minute,
				VolumeConcurrency: 1, ChangeSignal: signal, CPUBudget: tc.budget}
			if tc.budget > 0 {
				cfg.CPUBudgetCapacity = time.Duration(tc.budget * float64(10*time.Second)) // a cycle's worth
			}
			e, err := exporter.New(exporter.TestConfig(cfg))
			if err != nil {
				t.Fatal(err)
			}
			// Cycles at 0, 10, ..., 70 s; busy writes between any two.
			walked := walkCycles(t, e, src, clk, 8, func() { signal.write("uid-busy") })
			if strings.Join(walked, " ") != strings.Join(tc.want, " ") {
				t.Errorf("walks per cycle\n%q, want\n%q", walked, tc.want)
			}
			if got := testutil.ToFloat64(e.UnchangedWalksCounter()); got != float64(tc.wantUnchanged) {
				t.Errorf("walks_unchanged_total %v, want %d", got, tc.wantUnchanged)
			}
			if got := testutil.ToFloat64(e.DeferredWalksCounter(exporter.DeferredCPUBudget)); got != float64(tc.wantBudget) {
				t.Errorf("walks_deferred_total{reason=cpu_budget} %v, want %d", got, tc.wantBudget)
			}
		})
	}
}

// TestChangeSignalUnchangedLeftAtCycleEnd: a part vouched unchanged that no walk slot freed up
// for before its cycle's deadline is counted unchanged, not as a shortfall of the slots.
func TestChangeSignalUnchangedLeftAtCycleEnd(t *testing.T) {
	clk := exportertest.NewClock(t0)
	gate := exportertest.NewGate()
	t.Cleanup(gate.Open) // whatever held, on failure too
	var hold atomic.Bool
	src := exportertest.NewSource(func(ctx context.Context, p part.Pod, v part.Part) (part.Measurement, error) {
		at := clk.Now()
		if v.Name == "busy" && hold.Load() {
			gate.Hold(ctx, []part.Pod{p})
		}
		return part.Measurement{UsedBytes: 10, MeasuredAt: at, CompletedAt: at}, nil
	}).Measurer()
	pods := exportertest.NewPods(exporter.TestVolumes(map[string]int64{"quiet": 100, "busy": 100}, "quiet", "busy")...)
	signal := &fakeSignal{writes: map[string]int{}}
	e, err := exporter.New(exporter.TestConfig(exporter.Config{NodeName: "node-1", Source: src, Pods: pods, Now: clk.Now,
		UnlimitedInterval: time.Minute, VolumeConcurrency: 1, ChangeSignal: signal}))
	if err != nil {
		t.Fatal(err)
	}
	e.Refresh(context.Background())
	e.WaitForWalks() // both measured, their marks kept

	signal.write("uid-busy")
	clk.Add(10 * time.Second)
	hold.Store(true) // busy's walk holds the only slot past the cycle's deadline
	walks, stopWalks := context.WithCancel(context.Background())
	t.Cleanup(stopWalks)
	cycle, endCycle := context.WithTimeout(walks, 200*time.Millisecond)
	defer endCycle()
	e.RefreshWalks(cycle, walks)
	poll(t, func() bool { return testutil.ToFloat64(e.UnchangedWalksCounter()) == 1 })
	if n := testutil.ToFloat64(e.DeferredWalksCounter(exporter.DeferredNoSlot)); n != 0 {
		t.Errorf("walks_deferred_total{reason=no_slot} %v, want 0: quiet was vouched unchanged", n)
	}
	gate.Release()
	e.WaitForWalks()
}

// TestChangeSignalRuntimeClasses: a sandboxed runtime (Kata with virtio-fs) writes a pod's
// files from processes outside the pod's cgroup, whose counters then stay level however much
// it writes: every part of such a pod was vouched unchanged, and with SkipUnchanged not walked
// again before UnlimitedInterval whatever it wrote (issue 37, item 8). Now only the pods of the
// node's default runtime (no RuntimeClass) and of the RuntimeClasses listed as carried by their
// cgroup (ChangeSignalRuntimeClasses) get a mark; any other is walked every cycle, as without
// the signal, and counted by emptydir_exporter_change_marks_total{outcome="runtime_class"}.
func TestChangeSignalRuntimeClasses(t *testing.T) {
	for _, tc := range []struct {
		name         string
		runtimeClass string   // of the pod "sandboxed"; "quiet" runs under the default runtime
		carried      []string // Config.ChangeSignalRuntimeClasses
		vouched      bool     // whether "sandboxed" is vouched unchanged, as "quiet" is
	}{
		{name: "kata, by default", runtimeClass: "kata"},
		{name: "kata, runc-like classes listed", runtimeClass: "kata", carried: []string{"runc", "crun"}},
		{name: "a runc-like class not listed", runtimeClass: "runc"},
		{name: "a runc-like class listed", runtimeClass: "runc", carried: []string{"runc", "crun"}, vouched: true},
		{name: "the default runtime", runtimeClass: "", vouched: true},
		{name: "the default runtime, classes listed", runtimeClass: "", carried: []string{"nvidia"}, vouched: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := exportertest.NewClock(t0)
			src := newCostlySource(clk, 0, map[string]int64{"sandboxed": 10, "quiet": 10})
			pods := exporter.TestVolumes(map[string]int64{"sandboxed": 100, "quiet": 100}, "sandboxed", "quiet")
			for i := range pods {
				if pods[i].Pod == "pod-sandboxed" {
					pods[i].RuntimeClass = tc.runtimeClass
				}
			}
			signal := &fakeSignal{writes: map[string]int{}} // nobody's cgroup counts a write
			e, err := exporter.New(exporter.TestConfig(exporter.Config{NodeName: "node-1", Source: src, Pods: exportertest.NewPods(pods...),
				Now: clk.Now, UnlimitedInterval: time.Minute, VolumeConcurrency: 1, ChangeSignal: signal, SkipUnchanged: true,
				ChangeSignalRuntimeClasses: tc.carried}))
			if err != nil {
				t.Fatal(err)
			}
			// Cycles at 0, 10, ..., 70 s: a part vouched unchanged is walked at 0 s and once its
			// walk is a minute old, at 60 s (overdue, first); one not vouched, every cycle.
			got := walkCycles(t, e, src, clk, 8, nil)
			want := []string{"quiet,sandboxed", "sandboxed", "sandboxed", "sandboxed", "sandboxed", "sandboxed", "quiet,sandboxed", "sandboxed"}
			if tc.vouched {
				want = []string{"quiet,sandboxed", "", "", "", "", "", "quiet,sandboxed", ""}
			}
			if !slices.Equal(got, want) {
				t.Errorf("walks per cycle\n%q, want\n%q", got, want)
			}
			outcomes := counters(t, e, "emptydir_exporter_change_marks_total", "outcome")
			wantOutcomes := map[string]float64{change.MarkRead: 16}
			if !tc.vouched {
				wantOutcomes = map[string]float64{change.MarkRead: 8, change.MarkRuntimeClass: 8}
			}
			if !maps.Equal(outcomes, wantOutcomes) {
				t.Errorf("emptydir_exporter_change_marks_total by outcome %v, want %v", outcomes, wantOutcomes)
			}
		})
	}
}
