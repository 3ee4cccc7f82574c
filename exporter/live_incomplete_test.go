package exporter_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emptydir-guard/emptydir-guard/exporter"
	"github.com/emptydir-guard/emptydir-guard/exporter/exportertest"
	"github.com/emptydir-guard/emptydir-guard/exporter/part"
	"github.com/emptydir-guard/emptydir-guard/exporter/source"
	"github.com/emptydir-guard/emptydir-guard/internal/liveapi"
)

// TestLiveAnswerSaysSinceWhenIncomplete: the live answer carries the exporter's own evidence of
// how long a subject has been measurable only as a lower bound (issue 37, item 6): the
// remediator's --policy.evict-incomplete-after decides on it, never on an alert's startsAt,
// which anyone who can publish series or rules can forge. A live walk that is a lower bound
// continues the part's run of lower-bound walks (periodic ones before it); a complete one ends
// it, and the next lower bound starts a run at its own start. The pod's and the container's
// since are the earliest of the parts they count.
func TestLiveAnswerSaysSinceWhenIncomplete(t *testing.T) {
	const uid = "0000000a-0000-4000-8000-000000000000"
	const data, layer, logs = "data", "container/main/writable-layer", "container/main/logs"
	clk := exportertest.NewClock(t0)
	pods := exportertest.NewPods(part.Pod{Namespace: "ns", Pod: "p", UID: uid,
		Parts: []part.Part{
			{Name: data, Medium: part.MediumDisk, LimitBytes: limit(1 << 20), BudgetBytes: limit(1 << 30)},
			{Name: layer, Kind: part.KindWritableLayer, Container: "main", BudgetBytes: limit(1 << 30)},
			{Name: logs, Kind: part.KindContainerLogs, Container: "main", BudgetBytes: limit(1 << 30)},
		},
		Storage: &part.PodStorage{LimitBytes: limit(1 << 30), Containers: []part.Container{{Name: "main", ID: "containerd://a", LimitBytes: limit(1 << 30)}}},
	})
	table := exportertest.NewTable()
	// set makes each part answer, from now on, a walk that starts at the clock's time: data
	// racing (a lower bound) or not, the writable layer located or not.
	set := func(dataRacing, layerUnlocated bool) {
		at := clk.Now()
		d := part.Measurement{UsedBytes: 4096, MeasuredAt: at, CompletedAt: at, Method: part.MethodWalk}
		if dataRacing {
			d.ChangedDirectories = 2
		}
		table.Set(uid, data, d)
		l := part.Measurement{UsedBytes: 4096, MeasuredAt: at, CompletedAt: at, Method: part.MethodWalk}
		if layerUnlocated {
			l = part.Measurement{Unlocated: source.LayerNoRootfsMount, Method: part.MethodNone, MeasuredAt: at, CompletedAt: at}
		}
		table.Set(uid, layer, l)
		table.Set(uid, logs, part.Measurement{UsedBytes: 4096, MeasuredAt: at, CompletedAt: at, Method: part.MethodFiles})
	}
	e, err := exporter.New(exporter.TestConfig(exporter.Config{NodeName: "node-1", Pods: pods, Now: clk.Now,
		Source: exportertest.NewSource(table.Measure).Measurer(), MeasureEphemeralStorage: true}))
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(liveapi.Pattern, e.LiveHandler())
	ask := func(step string) liveapi.Response {
		t.Helper()
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/live/namespaces/ns/pods/p?uid="+uid, nil))
		var r liveapi.Response
		if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &r) != nil || len(r.Volumes) != 1 || r.EphemeralStorage == nil || len(r.EphemeralStorage.Containers) != 1 {
			t.Fatalf("%s: %d %s", step, w.Code, w.Body)
		}
		return r
	}
	check := func(step string, r liveapi.Response, dataSince, podSince, containerSince time.Time) {
		t.Helper()
		if got := r.Volumes[0].IncompleteSince; !got.Equal(dataSince) {
			t.Errorf("%s: volume incompleteSince %s, want %s", step, got, dataSince)
		}
		if got := r.EphemeralStorage.IncompleteSince; !got.Equal(podSince) {
			t.Errorf("%s: pod incompleteSince %s, want %s", step, got, podSince)
		}
		if got := r.EphemeralStorage.Containers[0].IncompleteSince; !got.Equal(containerSince) {
			t.Errorf("%s: container incompleteSince %s, want %s", step, got, containerSince)
		}
	}

	// Periodic walks: data racing from first on, the layer located.
	first := clk.Now()
	set(true, false)
	e.Refresh(context.Background())
	clk.Add(time.Hour)
	set(true, false)
	e.Refresh(context.Background())

	// Two hours in, the live walk is a lower bound still: the run began with the first walk.
	clk.Add(time.Hour)
	set(true, true)
	layerFrom := clk.Now()
	check("live lower bound after two hours of them", ask("live lower bound"), first, first, layerFrom)

	// A complete live walk ends the run: nothing to say.
	clk.Add(time.Minute)
	set(false, false)
	r := ask("live complete")
	if r.Volumes[0].LowerBound || r.EphemeralStorage.LowerBound {
		t.Fatalf("live complete: %+v", r)
	}
	check("live complete", r, time.Time{}, time.Time{}, time.Time{})

	// The next lower bound, live, starts a run of its own: a minute is no evidence of hours.
	clk.Add(time.Minute)
	set(true, false)
	again := clk.Now()
	check("live lower bound after a complete walk", ask("live lower bound again"), again, again, time.Time{})

	// The run the live walks recorded goes on in the periodic walks, and back in the live ones.
	clk.Add(time.Minute)
	e.Refresh(context.Background())
	clk.Add(time.Minute)
	set(true, false)
	check("live lower bound after a periodic one", ask("live lower bound after a periodic one"), again, again, time.Time{})
}

// TestLiveWalkCutByBudgetIsNoEvidence: a live walk cut because its caller's live CPU budget ran
// out (issue 37, item 7) says nothing of the volume: it is answered as a lower bound, but is not
// recorded as the volume's measurement nor continues its run of lower bounds, so that no caller
// (a tenant asking for another tenant's pod on a spent budget) can make a volume look
// incomplete for hours to the remediator's --policy.evict-incomplete-after.
func TestLiveWalkCutByBudgetIsNoEvidence(t *testing.T) {
	const uid = "0000000b-0000-4000-8000-000000000000"
	clk := exportertest.NewClock(t0)
	var cost atomic.Int64
	var racing atomic.Bool
	src := exportertest.NewSource(func(context.Context, part.Pod, part.Part) (part.Measurement, error) {
		m := part.Measurement{UsedBytes: 4096, MeasuredAt: clk.Now(), CompletedAt: clk.Now(), Method: part.MethodWalk}
		if racing.Load() {
			m.ChangedDirectories = 1
		}
		return m, nil
	}).Costs(func(part.Pod, part.Part) time.Duration { return time.Duration(cost.Load()) }).Measurer()
	pods := exportertest.NewPods(exportertest.PodWith("ns", "p", uid, exportertest.VolLimit("data", part.MediumDisk, 1<<20)))
	e, err := exporter.New(exporter.TestConfig(exporter.Config{NodeName: "node-1", Pods: pods, Now: clk.Now, Source: src}))
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(liveapi.Pattern, e.LiveHandler())
	ask := func(step string) liveapi.Volume {
		t.Helper()
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/live/namespaces/ns/pods/p?uid="+uid+"&volume=data", nil))
		var r liveapi.Response
		if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &r) != nil || len(r.Volumes) != 1 {
			t.Fatalf("%s: %d %s", step, w.Code, w.Body)
		}
		return r.Volumes[0]
	}

	cost.Store(int64(time.Second))
	e.Refresh(context.Background()) // a complete periodic walk

	// A live walk costlier than the caller's budget for the namespace: cut, a lower bound.
	clk.Add(time.Minute)
	cost.Store(int64(time.Minute))
	cutAt := clk.Now()
	if v := ask("cut"); !v.CutShort || !v.LowerBound || !v.IncompleteSince.Equal(cutAt) {
		t.Fatalf("cut walk: %+v; want a lower bound, cut short, since its own start %s", v, cutAt)
	}
	// Its budget full again, a walk that is a lower bound of its own (directories changed): its run
	// starts with it, not with the cut walk.
	clk.Add(5 * time.Minute)
	cost.Store(int64(time.Second))
	racing.Store(true)
	racingAt := clk.Now()
	if v := ask("racing"); v.CutShort || !v.LowerBound || !v.IncompleteSince.Equal(racingAt) {
		t.Errorf("racing walk after a cut one: %+v; want a lower bound since its own start %s, not the cut walk's %s", v, racingAt, cutAt)
	}
}
