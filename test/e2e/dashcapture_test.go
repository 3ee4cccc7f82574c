package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/emptydir-guard/emptydir-guard/internal/dashboards"
	"github.com/emptydir-guard/emptydir-guard/test/cluster"
	"github.com/emptydir-guard/emptydir-guard/test/framework"
	"github.com/emptydir-guard/emptydir-guard/test/monitoring"
)

// dashboardCaptureEnv names the file TestSeedScenario writes the dashboards' data to
// (make dashboard-data): every panel target over the scenario's window, as Prometheus
// answered, for the pictures in docs/dashboards.md. Unset, nothing is captured.
const dashboardCaptureEnv = "EMPTYDIR_GUARD_DASHBOARD_CAPTURE"

// About as many points per series as a half-width Grafana panel asks for, never finer than
// the stack's scrape interval.
const (
	capturePoints  = 120
	captureMinStep = 5 * time.Second
)

// captureDashboards runs every panel target of dashboards/*.json from..to as Grafana would
// (instant targets at to, range targets on a step grid) and writes the answers to path. A
// query that fails is recorded with its error, as Grafana shows one, and logged.
func captureDashboards(ctx context.Context, t *testing.T, mon *monitoring.Stack, vars map[string]string, from, to time.Time, path string) {
	t.Helper()
	step := max(captureMinStep, (to.Sub(from) / capturePoints).Round(time.Second))
	capture := dashboards.Capture{
		Run:         runName(t),
		From:        from.UTC().Truncate(time.Second),
		To:          to.UTC().Truncate(time.Second),
		StepSeconds: int(step / time.Second),
		Variables:   vars,
	}
	files, err := filepath.Glob(framework.RepoPath("dashboards/*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("dashboards: %v (%d files)", err, len(files))
	}
	failed := 0
	for _, file := range files {
		d, err := dashboards.ReadDashboard(file)
		if err != nil {
			t.Fatal(err)
		}
		cd := dashboards.CapturedDashboard{File: filepath.Base(file), Panels: dashboards.CapturePlan(d, vars)}
		for _, p := range cd.Panels {
			for i := range p.Targets {
				tg := &p.Targets[i]
				start := capture.From
				if tg.Instant {
					start = capture.To
				}
				res, err := mon.QueryRange(ctx, tg.Expr, start, capture.To, step)
				if err != nil {
					failed++
					tg.Error = err.Error()
					t.Logf("%s / %s %s: %v", cd.File, p.Title, tg.RefID, err)
					continue
				}
				for _, s := range res {
					times := make([]time.Time, len(s.Values))
					values := make([]float64, len(s.Values))
					for k, pt := range s.Values {
						times[k], values[k] = pt.Time, pt.Value
					}
					tg.Series = append(tg.Series, dashboards.CapturedSeries{Labels: s.Metric, Values: capture.OnGrid(tg.Instant, times, values)})
				}
			}
		}
		capture.Dashboards = append(capture.Dashboards, cd)
	}
	data, err := capture.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("dashboard data (%s to %s, step %s, %d failed queries) written to %s", capture.From.Format(time.RFC3339), capture.To.Format(time.RFC3339), step, failed, path)
}

// The stack runs captureHold more before a capture, the guarded pod writing captureGrowth each
// captureEvery, so the pictures' rates, increases and growth forecasts have minutes to read.
const (
	captureHold   = 3 * time.Minute
	captureEvery  = 15 * time.Second
	captureGrowth = 1024 // KiB
)

// growForCapture grows the guarded pod's emptyDir, over its limit and kept by its
// PodDisruptionBudget, for captureHold.
func growForCapture(ctx context.Context, t *testing.T, c *cluster.Cluster, guarded *corev1.Pod) {
	t.Helper()
	for i := range int(captureHold / captureEvery) {
		script := fmt.Sprintf("dd if=/dev/zero of=/test/grow.%d bs=1K count=%d conv=fsync 2>&1", i, captureGrowth)
		if _, stderr, err := c.ExecInPod(ctx, guarded.Namespace, guarded.Name, "test2", "sh", "-c", script); err != nil {
			t.Fatalf("growing %s/%s for the capture: %v (%s)", guarded.Namespace, guarded.Name, err, stderr)
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(captureEvery):
		}
	}
}

// runName says which test on which commit made a capture, for the pictures' captions.
func runName(t *testing.T) string {
	out, err := exec.Command("git", "-C", framework.RepoPath("."), "rev-parse", "--short=7", "HEAD").Output()
	if err != nil {
		return t.Name()
	}
	return fmt.Sprintf("%s at %s", t.Name(), strings.TrimSpace(string(out)))
}
