package exporter_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/emptydir-guard/emptydir-guard/exporter"
	"github.com/emptydir-guard/emptydir-guard/exporter/exportertest"
	"github.com/emptydir-guard/emptydir-guard/exporter/part"
	"github.com/emptydir-guard/emptydir-guard/exporter/source"
	"github.com/emptydir-guard/emptydir-guard/internal/metricfilter"
)

// atTheDefaults is what a scrape of c gets with the exporter's default metric filter: no
// allow or deny list, no opt-in family (cmd/emptydir-exporter's metricFilter).
func atTheDefaults(t *testing.T, c prometheus.Collector) prometheus.Gatherer {
	t.Helper()
	f, err := metricfilter.New(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if f, err = f.WithOptIn(exporter.OptInFamilies, nil); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	return f.Gatherer(reg)
}

const (
	incompleteHelp = `# HELP emptydir_measurement_incomplete 1 while the volume's last measurement is a lower bound of its usage, by reason.
# TYPE emptydir_measurement_incomplete gauge
`
	incompleteSinceHelp = `# HELP emptydir_measurement_incomplete_since_timestamp_seconds Unix time in seconds when the volume's measurements became lower bounds; absent while complete.
# TYPE emptydir_measurement_incomplete_since_timestamp_seconds gauge
`
)

// TestIncompleteMeasurementPublishedAtTheDefaults: a volume measured only as a lower bound
// (a tenant racing every walk) is visible at the default collectors and filter, with why and
// since when; a complete volume costs no series; the since time holds across consecutive
// incomplete walks and restarts with the next incomplete walk after a complete one.
func TestIncompleteMeasurementPublishedAtTheDefaults(t *testing.T) {
	pods, table, src, now := fixture()
	first := t0.Add(-3 * time.Second) // the fixture's MeasuredAt
	table.Edit(func(uid, volume string, m *part.Measurement) {
		switch volume {
		case "cache":
			m.ChangedDirectories = 3
		case "tmp": // 2 unreadable entries already
			m.CutShort = true
		}
	})
	e := newTestExporter(t, pods, src, now)
	e.Refresh(context.Background())

	sinceOf := func(at time.Time) string { return fmt.Sprint(float64(at.UnixNano()) / 1e9) }
	want := func(cacheSince time.Time) string {
		s := incompleteHelp
		if !cacheSince.IsZero() {
			s += `emptydir_measurement_incomplete{medium="disk",namespace="shop",node="node-1",pod="cart-0",reason="changed_during_walk",uid="uid-cart",volume="cache"} 1
`
		}
		s += `emptydir_measurement_incomplete{medium="disk",namespace="web",node="node-1",pod="front",reason="cut_short",uid="uid-front",volume="tmp"} 1
emptydir_measurement_incomplete{medium="disk",namespace="web",node="node-1",pod="front",reason="unreadable",uid="uid-front",volume="tmp"} 1
` + incompleteSinceHelp
		if !cacheSince.IsZero() {
			s += `emptydir_measurement_incomplete_since_timestamp_seconds{medium="disk",namespace="shop",node="node-1",pod="cart-0",uid="uid-cart",volume="cache"} ` + sinceOf(cacheSince) + "\n"
		}
		return s + `emptydir_measurement_incomplete_since_timestamp_seconds{medium="disk",namespace="web",node="node-1",pod="front",uid="uid-front",volume="tmp"} ` + sinceOf(first) + "\n"
	}
	check := func(step string, cacheSince time.Time) {
		t.Helper()
		if err := testutil.GatherAndCompare(atTheDefaults(t, e), strings.NewReader(want(cacheSince)),
			"emptydir_measurement_incomplete", "emptydir_measurement_incomplete_since_timestamp_seconds"); err != nil {
			t.Errorf("%s: %v", step, err)
		}
	}
	check("first incomplete walks", first)

	// Walked again, still incomplete: since when stays the first walk's start.
	later := func(d time.Duration) {
		*now = now.Add(d)
		table.Edit(func(_, _ string, m *part.Measurement) { m.MeasuredAt = now.Add(-time.Second) })
		e.Refresh(context.Background())
	}
	later(time.Minute)
	check("incomplete again a minute later", first)

	// One complete walk of cache: its series go; the next incomplete walk starts anew.
	table.Edit(func(_, volume string, m *part.Measurement) {
		if volume == "cache" {
			m.ChangedDirectories = 0
		}
	})
	later(time.Minute)
	check("cache walked completely", time.Time{})
	table.Edit(func(_, volume string, m *part.Measurement) {
		if volume == "cache" {
			m.ChangedDirectories = 1
		}
	})
	later(time.Minute)
	check("cache incomplete again", now.Add(-time.Second))
}

// TestPodIncompleteMeasurementPublishedAtTheDefaults: a pod whose ephemeral-storage usage is a
// lower bound says so at the defaults, by reason (a part not measured yet, a writable layer
// not located, a part's walk incomplete) and since when; none while every part is complete.
func TestPodIncompleteMeasurementPublishedAtTheDefaults(t *testing.T) {
	const uid = "uid-p"
	at := t0.Add(-2 * time.Second)
	pods := exportertest.NewPods(part.Pod{Namespace: "ns", Pod: "p", UID: uid,
		Parts: []part.Part{
			{Name: "data", Medium: part.MediumDisk, BudgetBytes: limit(1 << 30)},
			{Name: "container/main/writable-layer", Kind: part.KindWritableLayer, Container: "main", BudgetBytes: limit(1 << 30)},
			{Name: "container/main/logs", Kind: part.KindContainerLogs, Container: "main", BudgetBytes: limit(1 << 30)},
		},
		Storage: &part.PodStorage{LimitBytes: limit(1 << 30), Containers: []part.Container{{Name: "main", ID: "containerd://a"}}},
	})
	table := exportertest.NewTable()
	table.Set(uid, "data", part.Measurement{UsedBytes: 4096, ChangedDirectories: 2, MeasuredAt: at, CompletedAt: at, Method: part.MethodWalk})
	table.Set(uid, "container/main/writable-layer", part.Measurement{Unlocated: source.LayerNoRootfsMount, Method: part.MethodNone, MeasuredAt: at, CompletedAt: at})
	table.Fail(uid, "container/main/logs", &part.MeasureError{Reason: part.ReasonIO, Err: errors.New("input/output error")})
	now := t0
	e, err := exporter.New(exporter.TestConfig(exporter.Config{NodeName: "node-1", Pods: pods,
		Source: exportertest.NewSource(table.Measure).Measurer(), Now: func() time.Time { return now }, MeasureEphemeralStorage: true}))
	if err != nil {
		t.Fatal(err)
	}
	e.Refresh(context.Background())

	const help = `# HELP emptydir_pod_ephemeral_storage_measurement_incomplete 1 while the pod's ephemeral-storage usage is a lower bound, by reason.
# TYPE emptydir_pod_ephemeral_storage_measurement_incomplete gauge
emptydir_pod_ephemeral_storage_measurement_incomplete{namespace="ns",node="node-1",pod="p",reason="changed_during_walk",uid="uid-p"} 1
emptydir_pod_ephemeral_storage_measurement_incomplete{namespace="ns",node="node-1",pod="p",reason="unlocated",uid="uid-p"} 1
emptydir_pod_ephemeral_storage_measurement_incomplete{namespace="ns",node="node-1",pod="p",reason="unmeasured",uid="uid-p"} 1
# HELP emptydir_pod_ephemeral_storage_measurement_incomplete_since_timestamp_seconds Unix time in seconds the pod's usage became a lower bound; absent while complete.
# TYPE emptydir_pod_ephemeral_storage_measurement_incomplete_since_timestamp_seconds gauge
emptydir_pod_ephemeral_storage_measurement_incomplete_since_timestamp_seconds{namespace="ns",node="node-1",pod="p",uid="uid-p"} `
	names := []string{"emptydir_pod_ephemeral_storage_measurement_incomplete", "emptydir_pod_ephemeral_storage_measurement_incomplete_since_timestamp_seconds"}
	if err := testutil.GatherAndCompare(atTheDefaults(t, e), strings.NewReader(help+fmt.Sprint(float64(at.Unix()))+"\n"), names...); err != nil {
		t.Error(err)
	}

	// Every part complete: nothing.
	table.Set(uid, "data", part.Measurement{UsedBytes: 4096, MeasuredAt: now, CompletedAt: now, Method: part.MethodWalk})
	table.Set(uid, "container/main/writable-layer", part.Measurement{UsedBytes: 4096, MeasuredAt: now, CompletedAt: now, Method: part.MethodWalk})
	table.Fail(uid, "container/main/logs", nil)
	table.Set(uid, "container/main/logs", part.Measurement{UsedBytes: 4096, MeasuredAt: now, CompletedAt: now, Method: part.MethodFiles})
	now = now.Add(time.Minute)
	e.Refresh(context.Background())
	if n, err := testutil.GatherAndCount(atTheDefaults(t, e), names...); err != nil || n != 0 {
		t.Errorf("%d series (%v) for a pod measured completely, want none", n, err)
	}
}
