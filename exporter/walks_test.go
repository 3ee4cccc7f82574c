package exporter

import (
	"context"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/emptydir-guard/emptydir-guard/internal/fswalk"
	"github.com/emptydir-guard/emptydir-guard/internal/liveapi"
)

// TestLiveWalkTakesOverPeriodicWalk: a live request for a volume whose periodic walk is under
// way cancels that walk instead of walking the volume a second time beside it (both would
// share the exporter's CPU, and a big volume's live walk could then outlast its bound), and
// its result is what the next cycle publishes.
func TestLiveWalkTakesOverPeriodicWalk(t *testing.T) {
	const uid = "0a1b2c3d-0000-4000-8000-000000000001"
	clk := &clock{t: t0}
	pods := &collPods{synced: true, pods: []PodVolumes{
		{Namespace: "big", Pod: "hoarder", UID: uid, Volumes: []Volume{{Name: "slow", Medium: MediumDisk}}},
	}}
	src := &slowSource{clock: clk, release: make(chan struct{}), fastDone: func() {}}
	e, err := New(testConfig(Config{NodeName: "node-1", Source: src, Pods: pods, Now: clk.Now}))
	if err != nil {
		t.Fatal(err)
	}
	walks, stopWalks := context.WithCancel(context.Background())
	t.Cleanup(stopWalks)
	cycle := func() {
		ctx, cancel := context.WithCancel(walks)
		cancel() // publish what has completed, do not wait for the walks started
		e.refresh(ctx, walks, 0)
	}
	cycle()
	k := volumeKey{uid, "slow"}
	if !poll(t, func() bool { src.mu.Lock(); defer src.mu.Unlock(); return src.slowWalks == 1 }) {
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
	if !poll(t, func() bool { src.mu.Lock(); defer src.mu.Unlock(); return src.slowCtxErr != nil && src.slowWalks == 2 }) {
		src.mu.Lock()
		t.Errorf("live walk started beside the periodic one: %d walks, the periodic one's context error %v; want it cancelled",
			src.slowWalks, src.slowCtxErr)
		src.mu.Unlock()
	}
	src.release <- struct{}{} // the live walk completes
	if code := <-answer; code != http.StatusOK {
		t.Fatalf("live request answered %d", code)
	}

	e.walks.mu.Lock()
	var got VolumeResult
	if rec := e.walks.volumes[k]; rec != nil && rec.latest != nil {
		got = *rec.latest
	}
	inFlight := e.walks.running[k] != nil
	e.walks.mu.Unlock()
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

// tearingSource is a VolumeSource whose volume folders are gone, and which plays the pod
// being deleted (change) while the walk runs, after the cycle listed it as running.
type tearingSource struct{ change func() }

func (s *tearingSource) Name() string { return "filesystem" }
func (s *tearingSource) Measure(ctx context.Context, pods []PodVolumes) []VolumeResult {
	return measureEach(ctx, pods, s.MeasureVolume)
}
func (s *tearingSource) MeasureVolume(context.Context, PodVolumes, Volume, *fswalk.CPUMeter) (Measurement, error) {
	s.change()
	return Measurement{}, fsError(&fs.PathError{Op: "open", Path: "/gone", Err: fs.ErrNotExist})
}

// TestVolumeTornDownDuringItsWalk: a pod deleted after the cycle listed it, whose volumes
// the kubelet tears down before the walk opens them, is judged by what the informer knows
// when the walk ends, or learns within the informer's lag (the kubelet may see a deletion
// before this exporter's informer does): terminating or gone, its missing volume is no
// measurement error; still running once the lag is over, it is one.
func TestVolumeTornDownDuringItsWalk(t *testing.T) {
	running := PodVolumes{Namespace: "ns", Pod: "p", UID: "uid-1", Volumes: []Volume{{Name: "data", Medium: MediumDisk}}}
	terminating := running
	terminating.Settling = true
	const lag = 2 * time.Second
	tests := []struct {
		name       string
		now        []PodVolumes  // the informer's pods once the walk runs
		learns     time.Duration // after the walk, the informer shows the pod terminating (0: never)
		wantErrors float64
	}{
		{"terminating", []PodVolumes{terminating}, 0, 0},
		{"deleted", nil, 0, 0},
		{"recreated under its name", []PodVolumes{func() PodVolumes { p := running; p.UID = "uid-2"; return p }()}, 0, 0},
		{"informer learns of the deletion within its lag", []PodVolumes{running}, 300 * time.Millisecond, 0},
		{"still running", []PodVolumes{running}, 0, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pods := &collPods{synced: true, pods: []PodVolumes{running}}
			set := func(now []PodVolumes) { pods.mu.Lock(); pods.pods = now; pods.mu.Unlock() }
			src := &tearingSource{change: func() {
				set(tc.now)
				if tc.learns > 0 {
					time.AfterFunc(tc.learns, func() { set([]PodVolumes{terminating}) })
				}
			}}
			e, err := New(testConfig(Config{NodeName: "node-1", Source: src, Pods: pods, Now: (&clock{t: t0}).Now}))
			if err != nil {
				t.Fatal(err)
			}
			e.walks.informerLag = lag
			if tc.learns == 0 && tc.wantErrors > 0 {
				e.walks.informerLag = 100 * time.Millisecond // no need to wait the whole lag
			}
			e.walks.cycle(context.Background(), context.Background(), []PodVolumes{running}, 0)
			if got := testutil.ToFloat64(e.measureErrors.WithLabelValues("filesystem", ReasonNotFound)); got != tc.wantErrors {
				t.Errorf("not_found errors %v, want %v", got, tc.wantErrors)
			}
		})
	}
}
