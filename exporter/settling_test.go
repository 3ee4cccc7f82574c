package exporter_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/emptydir-guard/emptydir-guard/exporter"
	"github.com/emptydir-guard/emptydir-guard/exporter/exportertest"
	"github.com/emptydir-guard/emptydir-guard/exporter/part"
	"github.com/emptydir-guard/emptydir-guard/exporter/source"
)

// TestSettlingPodsMissingVolumesAreNoFailure: on a node where pods come and go, the
// informer shows pods whose volumes the kubelet has not set up yet (Pending) or has torn
// down already (terminating). Their missing directories are not failures: no series, no
// measurement error, the cycle succeeds; a terminating pod's last numbers are not kept.
// A running pod's missing directory still is a failure, and so is any other error of a
// settling pod. Both the walking source and a whole-node source (the kubelet's) are checked.
func TestSettlingPodsMissingVolumesAreNoFailure(t *testing.T) {
	running := part.Pod{Namespace: "ns", Pod: "running", UID: "uid-running", Parts: []part.Part{{Name: "v", Medium: part.MediumDisk}}}
	pending := part.Pod{Namespace: "ns", Pod: "pending", UID: "uid-pending", Parts: []part.Part{{Name: "v", Medium: part.MediumDisk}}, Settling: true}
	terminating := part.Pod{Namespace: "ns", Pod: "terminating", UID: "uid-terminating", Parts: []part.Part{{Name: "v", Medium: part.MediumDisk}}}
	notFound := &part.MeasureError{Reason: part.ReasonNotFound, Err: os.ErrNotExist}

	type step struct {
		pods        []part.Pod
		missing     []string // UIDs whose volume directory is not there
		broken      []string // UIDs whose volume cannot be read (an io error)
		wantSeries  []string // UIDs with a used-bytes series
		wantSuccess float64
		wantErrors  map[string]float64 // by reason
	}
	settled := func(p part.Pod) part.Pod { p.Settling = true; return p }
	steps := []struct {
		name string
		step step
	}{
		{"all set up", step{pods: []part.Pod{running, terminating}, wantSeries: []string{"uid-running", "uid-terminating"}, wantSuccess: 1}},
		{"a pod not set up yet, another torn down while terminating", step{
			pods: []part.Pod{pending, running, settled(terminating)}, missing: []string{"uid-pending", "uid-terminating"},
			wantSeries: []string{"uid-running"}, wantSuccess: 1}},
		{"a running pod's directory missing is a failure", step{
			pods: []part.Pod{running}, missing: []string{"uid-running"},
			wantSeries: []string{"uid-running"}, wantSuccess: 0, wantErrors: map[string]float64{part.ReasonNotFound: 1}}},
		{"a settling pod's other errors are failures", step{
			pods: []part.Pod{running, pending}, broken: []string{"uid-pending"},
			wantSeries: []string{"uid-running"}, wantSuccess: 0, wantErrors: map[string]float64{part.ReasonNotFound: 1, part.ReasonIO: 1}}},
	}

	walkingSource := func(t *testing.T, steps []struct {
		name string
		step step
	}, unlimited time.Duration) {
		root := t.TempDir()
		lister := exportertest.NewPods()
		e, err := exporter.New(exporter.TestConfig(exporter.Config{NodeName: "node-1", Pods: lister, Source: &source.Filesystem{KubeletRootDir: root}, UnlimitedInterval: unlimited}))
		if err != nil {
			t.Fatal(err)
		}
		e.SetInformerLag(50 * time.Millisecond) // the informer here is never late
		for _, s := range steps {
			st := s.step
			for _, p := range st.pods {
				dir := part.EmptyDirPath(root, p.UID, "v")
				switch {
				case contains(st.missing, p.UID):
					if err := os.RemoveAll(filepath.Join(root, "pods", p.UID)); err != nil {
						t.Fatal(err)
					}
				case contains(st.broken, p.UID):
					// A file where the directory should be: the walk fails with io, not not_found.
					if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(dir, nil, 0o600); err != nil {
						t.Fatal(err)
					}
				default:
					if err := os.MkdirAll(dir, 0o755); err != nil {
						t.Fatal(err)
					}
				}
			}
			lister.Set(st.pods...)
			e.Refresh(context.Background())
			if unlimited > 0 { // publish what the cycle left walking in the background
				e.WaitForWalks()
				e.Refresh(context.Background())
			}
			checkSettling(t, s.name, e, st.wantSeries, st.wantSuccess, st.wantErrors)
		}
	}
	// At the slow cadence a volume without a sizeLimit is not walked again within a minute:
	// the terminating pod's torn-down volume must vanish all the same (the running pod's
	// missing directory, in the later steps, is only seen by a walk).
	for _, variant := range []struct {
		name      string
		unlimited time.Duration
		steps     int
	}{{"walking source", 0, len(steps)}, {"walking source at the slow cadence", time.Minute, 2}} {
		t.Run(variant.name, func(t *testing.T) {
			walkingSource(t, steps[:variant.steps], variant.unlimited)
		})
	}
	t.Run("whole-node source", func(t *testing.T) {
		lister := exportertest.NewPods()
		table := exportertest.NewTable()
		now := t0
		e := newTestExporter(t, lister, exportertest.NewSource(table.Measure), &now)
		for _, s := range steps {
			st := s.step
			table.Reset()
			for _, p := range st.pods {
				switch {
				case contains(st.missing, p.UID):
					table.Fail(p.UID, "v", notFound)
				case contains(st.broken, p.UID):
					table.Fail(p.UID, "v", &part.MeasureError{Reason: part.ReasonIO, Err: errors.New("not a directory")})
				default:
					table.Set(p.UID, "v", part.Measurement{UsedBytes: 4096, MeasuredAt: now.Add(-time.Second)})
				}
			}
			lister.Set(st.pods...)
			e.Refresh(context.Background())
			checkSettling(t, s.name, e, st.wantSeries, st.wantSuccess, st.wantErrors)
		}
	})
}

// checkSettling compares the series' UIDs, collection_success and the error counters
// (cumulative) with what a step wants.
func checkSettling(t *testing.T, step string, e *exporter.Exporter, wantSeries []string, wantSuccess float64, wantErrors map[string]float64) {
	t.Helper()
	got := e.SnapshotUIDs()
	if len(got) != len(wantSeries) || len(got) != testutil.CollectAndCount(e, "emptydir_used_bytes") {
		t.Errorf("%s: series of %v, want %v", step, got, wantSeries)
	}
	for _, uid := range wantSeries {
		if !contains(got, uid) {
			t.Errorf("%s: series of %v, want %v", step, got, wantSeries)
		}
	}
	success := fmt.Sprintf(`
# HELP emptydir_exporter_collection_success 1 when the last collection cycle measured every volume without a failure, else 0.
# TYPE emptydir_exporter_collection_success gauge
emptydir_exporter_collection_success{node="node-1",source="filesystem"} %v
`, wantSuccess)
	if err := testutil.CollectAndCompare(e, strings.NewReader(success), "emptydir_exporter_collection_success"); err != nil {
		t.Errorf("%s: %v", step, err)
	}
	for _, reason := range exporter.SourceReasons["filesystem"] {
		if n := testutil.ToFloat64(e.MeasureErrorsCounter("filesystem", reason)); n != wantErrors[reason] {
			t.Errorf("%s: measurement_errors_total{reason=%q} = %v, want %v", step, reason, n, wantErrors[reason])
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
