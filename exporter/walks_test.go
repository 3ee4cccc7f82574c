package exporter_test

import (
	"context"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/emptydir-guard/emptydir-guard/exporter"
	"github.com/emptydir-guard/emptydir-guard/exporter/exportertest"
	"github.com/emptydir-guard/emptydir-guard/exporter/part"
	"github.com/emptydir-guard/emptydir-guard/internal/liveapi"
)

// TestLiveWalkTakesOverPeriodicWalk: a live request for a volume whose periodic walk is under
// way cancels that walk instead of walking the volume a second time beside it (both would
// share the exporter's CPU, and a big volume's live walk could then outlast its bound), and
// its result is what the next cycle publishes.
func TestLiveWalkTakesOverPeriodicWalk(t *testing.T) {
	const uid = "0a1b2c3d-0000-4000-8000-000000000001"
	clk := exportertest.NewClock(t0)
	pods := exportertest.NewPods(
		part.Pod{Namespace: "big", Pod: "hoarder", UID: uid, Parts: []part.Part{{Name: "slow", Medium: part.MediumDisk}}},
	)
	gate := exportertest.NewGate()
	src := newSlowSource(clk, gate, nil)
	e, err := exporter.New(exporter.TestConfig(exporter.Config{NodeName: "node-1", Source: src, Pods: pods, Now: clk.Now}))
	if err != nil {
		t.Fatal(err)
	}
	walks, stopWalks := context.WithCancel(context.Background())
	t.Cleanup(stopWalks)
	cycle := func() {
		ctx, cancel := context.WithCancel(walks)
		cancel() // publish what has completed, do not wait for the walks started
		e.RefreshWalks(ctx, walks)
	}
	cycle()
	if !poll(t, func() bool { return gate.Held() == 1 }) {
		t.Fatal("the periodic walk did not start")
	}

	mux := http.NewServeMux()
	mux.Handle(liveapi.Pattern, e.LiveHandler())
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	answer := make(chan int, 1)
	go func() {
		resp, err := http.Get(srv.URL + "/live/namespaces/big/pods/hoarder?uid=" + uid + "&volume=slow")
		if err != nil {
			answer <- 0
			return
		}
		resp.Body.Close()
		answer <- resp.StatusCode
	}()
	if !poll(t, func() bool { return gate.Err() != nil && gate.Held() == 2 }) {
		t.Errorf("live walk started beside the periodic one: %d walks, the periodic one's context error %v; want it cancelled",
			gate.Held(), gate.Err())
	}
	gate.Release() // the live walk completes
	if code := <-answer; code != http.StatusOK {
		t.Fatalf("live request answered %d", code)
	}

	got, _ := e.LatestWalk(uid, "slow")
	inFlight := slices.Contains(e.WalksRunning(), uid+"/slow")
	if got.Measurement.UsedBytes != 1<<30 || inFlight {
		t.Errorf("after the live walk: latest %+v, in flight %v; want the live result and the volume free", got.Measurement, inFlight)
	}
	cycle()
	want := `
# HELP emptydir_used_bytes Bytes the emptyDir volume uses: allocated blocks, hard-linked inodes once, symlinks not followed.
# TYPE emptydir_used_bytes gauge
emptydir_used_bytes{medium="disk",namespace="big",node="node-1",pod="hoarder",uid="` + uid + `",volume="slow"} 1.073741824e+09
# HELP emptydir_exporter_measurement_errors_total Volumes that could not be measured, by source and reason.
# TYPE emptydir_exporter_measurement_errors_total counter
emptydir_exporter_measurement_errors_total{node="node-1",reason="io",source="filesystem"} 0
emptydir_exporter_measurement_errors_total{node="node-1",reason="not_found",source="filesystem"} 0
emptydir_exporter_measurement_errors_total{node="node-1",reason="permission",source="filesystem"} 0
emptydir_exporter_measurement_errors_total{node="node-1",reason="timeout",source="filesystem"} 0
`
	if err := testutil.CollectAndCompare(e, strings.NewReader(want), "emptydir_used_bytes", "emptydir_exporter_measurement_errors_total"); err != nil {
		t.Errorf("the cycle after the live walk (the cancelled walk is no error): %v", err)
	}
}

// TestVolumeTornDownDuringItsWalk: a pod deleted after the cycle listed it, whose volumes
// the kubelet tears down before the walk opens them, is judged by what the informer knows
// when the walk ends, or learns within the informer's lag (the kubelet may see a deletion
// before this exporter's informer does): terminating or gone, its missing volume is no
// measurement error; still running once the lag is over, it is one.
func TestVolumeTornDownDuringItsWalk(t *testing.T) {
	running := part.Pod{Namespace: "ns", Pod: "p", UID: "uid-1", Parts: []part.Part{{Name: "data", Medium: part.MediumDisk}}}
	terminating := running
	terminating.Settling = true
	const lag = 2 * time.Second
	tests := []struct {
		name       string
		now        []part.Pod    // the informer's pods once the walk runs
		learns     time.Duration // after the walk, the informer shows the pod terminating (0: never)
		wantErrors float64
	}{
		{"terminating", []part.Pod{terminating}, 0, 0},
		{"deleted", nil, 0, 0},
		{"recreated under its name", []part.Pod{func() part.Pod { p := running; p.UID = "uid-2"; return p }()}, 0, 0},
		{"informer learns of the deletion within its lag", []part.Pod{running}, 300 * time.Millisecond, 0},
		{"still running", []part.Pod{running}, 0, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pods := exportertest.NewPods(running)
			// The volume directories are gone, and the pod is deleted (tc.now) while the walk runs,
			// after the cycle listed it as running.
			src := exportertest.NewSource(exportertest.Answer(part.Measurement{},
				&part.MeasureError{Reason: part.ReasonNotFound, Err: &fs.PathError{Op: "open", Path: "/gone", Err: fs.ErrNotExist}}),
			).Before(func(context.Context, []part.Pod) {
				pods.Set(tc.now...)
				if tc.learns > 0 {
					time.AfterFunc(tc.learns, func() { pods.Set(terminating) })
				}
			}).Measurer()
			e, err := exporter.New(exporter.TestConfig(exporter.Config{NodeName: "node-1", Source: src, Pods: pods, Now: exportertest.NewClock(t0).Now}))
			if err != nil {
				t.Fatal(err)
			}
			e.SetInformerLag(lag)
			if tc.learns == 0 && tc.wantErrors > 0 {
				e.SetInformerLag(100 * time.Millisecond) // no need to wait the whole lag
			}
			e.WalkCycle(context.Background(), []part.Pod{running})
			if got := testutil.ToFloat64(e.MeasureErrorsCounter("filesystem", part.ReasonNotFound)); got != tc.wantErrors {
				t.Errorf("not_found errors %v, want %v", got, tc.wantErrors)
			}
		})
	}
}
