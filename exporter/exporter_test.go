package exporter_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/emptydir-guard/emptydir-guard/exporter"
	"github.com/emptydir-guard/emptydir-guard/exporter/calibrate"
	"github.com/emptydir-guard/emptydir-guard/exporter/exportertest"
	"github.com/emptydir-guard/emptydir-guard/exporter/notify"
	"github.com/emptydir-guard/emptydir-guard/exporter/part"
)

func limit(b int64) *int64 { return &b }

// t0 is the moment of the collector tests' clock (testdata/collect.golden.prom).
var t0 = time.Date(2026, 12, 2, 17, 0, 0, 0, time.UTC)

// fixture: two pods, three volumes, numbers measured 3s before the clock, answered from a
// table a test may edit between cycles by a source walked volume by volume.
func fixture() (*exportertest.Pods, *exportertest.Table, part.Source, *time.Time) {
	pods := exportertest.NewPods(
		part.Pod{Namespace: "shop", Pod: "cart-0", UID: "uid-cart", Parts: []part.Part{
			{Name: "cache", Medium: part.MediumDisk, LimitBytes: limit(1 << 20)},
			{Name: "scratch", Medium: part.MediumMemory},
		}},
		part.Pod{Namespace: "web", Pod: "front", UID: "uid-front", Parts: []part.Part{
			{Name: "tmp", Medium: part.MediumDisk, LimitBytes: limit(10 << 20)},
		}},
	)
	at := t0.Add(-3 * time.Second)
	table := exportertest.NewTable()
	table.Set("uid-cart", "cache", part.Measurement{UsedBytes: 10244096, CapacityBytes: 100 << 30, AvailableBytes: 40 << 30, InodesUsed: 2, QuotaExcessBytes: 3 << 20, MeasuredAt: at, Method: part.MethodWalk})
	table.Set("uid-cart", "scratch", part.Measurement{UsedBytes: 2048000, CapacityBytes: 64 << 20, AvailableBytes: 62 << 20, InodesUsed: 3, MeasuredAt: at, Method: part.MethodWalk})
	table.Set("uid-front", "tmp", part.Measurement{UsedBytes: 4096, CapacityBytes: 100 << 30, AvailableBytes: 40 << 30, InodesUsed: 1, UnreadableEntries: 2, MeasuredAt: at, Method: part.MethodProjectQuota})
	now := t0
	return pods, table, exportertest.NewSource(table.Measure).Measurer(), &now
}

func newTestExporter(t *testing.T, pods exporter.PodLister, src part.Source, now *time.Time) *exporter.Exporter {
	t.Helper()
	return newTestExporterWith(t, exporter.Config{Source: src, Pods: pods, Now: func() time.Time { return *now }})
}

// newTestExporterWith is newTestExporter with the settings of cfg.
func newTestExporterWith(t *testing.T, cfg exporter.Config) *exporter.Exporter {
	t.Helper()
	cfg.NodeName, cfg.CPUBudget = "node-1", 0.05
	e, err := exporter.New(exporter.TestConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	e.SetInformerLag(50 * time.Millisecond) // the test's pod lister is never late
	return e
}

func TestCollectGolden(t *testing.T) {
	pods, _, src, now := fixture()
	e := newTestExporter(t, pods, src, now)
	e.Refresh(context.Background())

	golden, err := os.Open("testdata/collect.golden.prom")
	if err != nil {
		t.Fatal(err)
	}
	defer golden.Close()
	if err := testutil.CollectAndCompare(e, golden); err != nil {
		t.Error(err)
	}
}

func TestCollectLint(t *testing.T) {
	pods, _, src, now := fixture()
	e := newTestExporter(t, pods, src, now)
	e.Refresh(context.Background())
	problems, err := testutil.CollectAndLint(e)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

func TestDeletedPodSeriesVanish(t *testing.T) {
	pods, _, src, now := fixture()
	e := newTestExporter(t, pods, src, now)
	e.Refresh(context.Background())
	if n := testutil.CollectAndCount(e, "emptydir_used_bytes"); n != 3 {
		t.Fatalf("before deletion: %d used series, want 3", n)
	}
	listed, _ := pods.List()
	pods.Set(listed[1:]...) // shop/cart-0 is deleted
	e.Refresh(context.Background())

	want := `
# HELP emptydir_used_bytes Bytes the emptyDir volume uses: allocated blocks, hard-linked inodes once, symlinks not followed.
# TYPE emptydir_used_bytes gauge
emptydir_used_bytes{medium="disk",namespace="web",node="node-1",pod="front",uid="uid-front",volume="tmp"} 4096
# HELP emptydir_limit_bytes The emptyDir volume's sizeLimit in bytes; absent when the volume has none.
# TYPE emptydir_limit_bytes gauge
emptydir_limit_bytes{medium="disk",namespace="web",node="node-1",pod="front",uid="uid-front",volume="tmp"} 1.048576e+07
`
	if err := testutil.CollectAndCompare(e, strings.NewReader(want), "emptydir_used_bytes", "emptydir_limit_bytes"); err != nil {
		t.Error(err)
	}
}

// TestFailedVolumeKeepsLastValueButAges: a volume that cannot be measured keeps its
// last good numbers, but its age grows and the cycle counts as failed, so nobody
// takes them for fresh.
func TestFailedVolumeKeepsLastValueButAges(t *testing.T) {
	pods, table, src, now := fixture()
	e := newTestExporter(t, pods, src, now)
	e.Refresh(context.Background())

	*now = now.Add(30 * time.Second)
	table.Edit(func(_, _ string, m *part.Measurement) { // the others are re-measured 3 s before the scrape
		m.MeasuredAt = now.Add(-3 * time.Second)
	})
	table.Fail("uid-cart", "cache", &part.MeasureError{Reason: part.ReasonPermission, Err: os.ErrPermission})
	e.Refresh(context.Background())

	want := `
# HELP emptydir_used_bytes Bytes the emptyDir volume uses: allocated blocks, hard-linked inodes once, symlinks not followed.
# TYPE emptydir_used_bytes gauge
emptydir_used_bytes{medium="disk",namespace="shop",node="node-1",pod="cart-0",uid="uid-cart",volume="cache"} 1.0244096e+07
emptydir_used_bytes{medium="memory",namespace="shop",node="node-1",pod="cart-0",uid="uid-cart",volume="scratch"} 2.048e+06
emptydir_used_bytes{medium="disk",namespace="web",node="node-1",pod="front",uid="uid-front",volume="tmp"} 4096
# HELP emptydir_measurement_age_seconds Seconds between the measurement behind this volume's values and this scrape.
# TYPE emptydir_measurement_age_seconds gauge
emptydir_measurement_age_seconds{medium="disk",namespace="shop",node="node-1",pod="cart-0",uid="uid-cart",volume="cache"} 33
emptydir_measurement_age_seconds{medium="memory",namespace="shop",node="node-1",pod="cart-0",uid="uid-cart",volume="scratch"} 3
emptydir_measurement_age_seconds{medium="disk",namespace="web",node="node-1",pod="front",uid="uid-front",volume="tmp"} 3
# HELP emptydir_exporter_collection_success 1 when the last collection cycle measured every volume without a failure, else 0.
# TYPE emptydir_exporter_collection_success gauge
emptydir_exporter_collection_success{node="node-1",source="filesystem"} 0
# HELP emptydir_exporter_last_success_timestamp_seconds Unix time in seconds of the last fully successful collection cycle.
# TYPE emptydir_exporter_last_success_timestamp_seconds gauge
emptydir_exporter_last_success_timestamp_seconds{node="node-1",source="filesystem"} 1.7962308e+09
# HELP emptydir_exporter_measurement_errors_total Volumes that could not be measured, by source and reason.
# TYPE emptydir_exporter_measurement_errors_total counter
emptydir_exporter_measurement_errors_total{node="node-1",reason="io",source="filesystem"} 0
emptydir_exporter_measurement_errors_total{node="node-1",reason="not_found",source="filesystem"} 0
emptydir_exporter_measurement_errors_total{node="node-1",reason="permission",source="filesystem"} 1
emptydir_exporter_measurement_errors_total{node="node-1",reason="timeout",source="filesystem"} 0
# HELP emptydir_exporter_collections_total Collection cycles, by result.
# TYPE emptydir_exporter_collections_total counter
emptydir_exporter_collections_total{node="node-1",result="error"} 1
emptydir_exporter_collections_total{node="node-1",result="success"} 1
`
	if err := testutil.CollectAndCompare(e, strings.NewReader(want),
		"emptydir_used_bytes", "emptydir_measurement_age_seconds", "emptydir_exporter_collection_success",
		"emptydir_exporter_last_success_timestamp_seconds", "emptydir_exporter_measurement_errors_total",
		"emptydir_exporter_collections_total"); err != nil {
		t.Error(err)
	}
}

func TestUnsyncedInformerPublishesNoVolumes(t *testing.T) {
	pods, _, src, now := fixture()
	pods.SetSynced(false)
	e := newTestExporter(t, pods, src, now)
	e.Refresh(context.Background())
	want := `
# HELP emptydir_exporter_collection_success 1 when the last collection cycle measured every volume without a failure, else 0.
# TYPE emptydir_exporter_collection_success gauge
emptydir_exporter_collection_success{node="node-1",source="filesystem"} 0
# HELP emptydir_exporter_pod_informer_synced 1 when the pod informer has synced with the API server.
# TYPE emptydir_exporter_pod_informer_synced gauge
emptydir_exporter_pod_informer_synced{node="node-1"} 0
`
	if err := testutil.CollectAndCompare(e, strings.NewReader(want),
		"emptydir_exporter_collection_success", "emptydir_exporter_pod_informer_synced"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(e, "emptydir_used_bytes"); n != 0 {
		t.Errorf("%d used series before the informer synced, want 0", n)
	}
}

func TestNewRequiresSourceAndPods(t *testing.T) {
	if _, err := exporter.New(exporter.Config{NodeName: "n"}); err == nil {
		t.Error("New without Source and Pods succeeded")
	}
}

// TestMetricsMatchDocs keeps docs/metrics.md, the contract the rules and dashboards
// are checked against, true to what the exporter really publishes.
func TestMetricsMatchDocs(t *testing.T) {
	doc, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	section := string(doc)
	section = section[strings.Index(section, "## Exporter"):strings.Index(section, "## Remediator")]
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(emptydir_[a-z_]+)`").FindAllStringSubmatch(section, -1) {
		documented[m[1]] = true
	}

	pods, _, src, now := fixture()
	// With every optional part: the change signal's series exist only with one.
	e := newTestExporterWith(t, exporter.Config{Source: src, Pods: pods, Now: func() time.Time { return *now },
		ChangeSignal: &fakeSignal{}})
	ch := make(chan *prometheus.Desc, 64)
	e.Describe(ch)
	// The layout calibration's series, which the command registers beside the exporter's.
	calibrate.New("node-1", func() calibrate.Result { return calibrate.Result{} }, slog.New(slog.DiscardHandler)).Describe(ch)
	// The notifier's series, which the command registers beside them with --remediator.url.
	nc := notify.DefaultConfig()
	nc.URL, nc.TokenFile, nc.Node = "http://remediator:9732", "token", "node-1"
	notifier, err := notify.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range notifier.Collectors() {
		c.Describe(ch)
	}
	close(ch)
	published := map[string]bool{"emptydir_exporter_build_info": true} // registered by the command
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	for d := range ch {
		published[fqName.FindStringSubmatch(d.String())[1]] = true
	}
	for name := range published {
		if !documented[name] {
			t.Errorf("%s is published but not documented in docs/metrics.md", name)
		}
	}
	for name := range documented {
		if !published[name] {
			t.Errorf("%s is documented in docs/metrics.md but not published", name)
		}
	}
}

// newSlowSource returns a walked source on which the volume "slow" is held by gate until
// released or its context ends, as a huge or hostile volume's walk is; the others answer at
// once, stamped with the clock, and then call fastDone, if set.
func newSlowSource(clk *exportertest.Clock, gate *exportertest.Gate, fastDone func()) *exportertest.Measurer {
	return exportertest.NewSource(func(ctx context.Context, p part.Pod, v part.Part) (part.Measurement, error) {
		start := clk.Now()
		if v.Name == "slow" {
			gate.Hold(ctx, []part.Pod{p})
			return part.Measurement{UsedBytes: 1 << 30, MeasuredAt: start, CompletedAt: clk.Now()}, nil
		}
		if ctx.Err() != nil { // a real walk stops when its context ends; the source answers its error
			return part.Measurement{}, ctx.Err()
		}
		if fastDone != nil {
			fastDone()
		}
		return part.Measurement{UsedBytes: 4096, MeasuredAt: start, CompletedAt: start}, nil
	}).Measurer()
}

// TestSlowVolumeDoesNotStarveOthers: a volume whose walk takes longer than the
// interval must not keep the other volumes of the node from being measured every
// cycle, and its own staleness must show in its age.
func TestSlowVolumeDoesNotStarveOthers(t *testing.T) {
	clk := exportertest.NewClock(t0)
	pods := exportertest.NewPods(
		part.Pod{Namespace: "big", Pod: "hoarder", UID: "uid-slow", Parts: []part.Part{{Name: "slow", Medium: part.MediumDisk}}},
		part.Pod{Namespace: "shop", Pod: "cart-0", UID: "uid-cart", Parts: []part.Part{{Name: "cache", Medium: part.MediumDisk}}},
		part.Pod{Namespace: "web", Pod: "front", UID: "uid-front", Parts: []part.Part{{Name: "tmp", Medium: part.MediumDisk}}},
	)
	var fastCount atomic.Int32
	gate := exportertest.NewGate()
	src := newSlowSource(clk, gate, func() { fastCount.Add(1) })
	e, err := exporter.New(exporter.TestConfig(exporter.Config{NodeName: "node-1", Source: src, Pods: pods, Now: clk.Now, VolumeConcurrency: 2}))
	if err != nil {
		t.Fatal(err)
	}
	walks, stopWalks := context.WithCancel(context.Background())
	t.Cleanup(stopWalks)
	// One cycle, whose interval ends once both fast volumes are measured and only
	// the slow one is still in flight.
	cycle := func() {
		fastCount.Store(0)
		ctx, cancel := context.WithCancel(walks)
		defer cancel()
		go func() {
			defer cancel()
			poll(t, func() bool {
				if ctx.Err() != nil {
					return true // the cycle ended by itself, having no walk left to wait for
				}
				running := e.WalksRunning()
				return fastCount.Load() == 2 && len(running) == 1 && running[0] == "uid-slow/slow"
			})
		}()
		e.RefreshWalks(ctx, walks)
	}

	for i := range 3 {
		cycle()
		want := `
# HELP emptydir_measurement_age_seconds Seconds between the measurement behind this volume's values and this scrape.
# TYPE emptydir_measurement_age_seconds gauge
emptydir_measurement_age_seconds{medium="disk",namespace="shop",node="node-1",pod="cart-0",uid="uid-cart",volume="cache"} 0
emptydir_measurement_age_seconds{medium="disk",namespace="web",node="node-1",pod="front",uid="uid-front",volume="tmp"} 0
# HELP emptydir_exporter_collection_success 1 when the last collection cycle measured every volume without a failure, else 0.
# TYPE emptydir_exporter_collection_success gauge
emptydir_exporter_collection_success{node="node-1",source="filesystem"} 0
# HELP emptydir_exporter_measurement_errors_total Volumes that could not be measured, by source and reason.
# TYPE emptydir_exporter_measurement_errors_total counter
emptydir_exporter_measurement_errors_total{node="node-1",reason="io",source="filesystem"} 0
emptydir_exporter_measurement_errors_total{node="node-1",reason="not_found",source="filesystem"} 0
emptydir_exporter_measurement_errors_total{node="node-1",reason="permission",source="filesystem"} 0
emptydir_exporter_measurement_errors_total{node="node-1",reason="timeout",source="filesystem"} 0
`
		if err := testutil.CollectAndCompare(e, strings.NewReader(want), "emptydir_measurement_age_seconds",
			"emptydir_exporter_collection_success", "emptydir_exporter_measurement_errors_total"); err != nil {
			t.Errorf("cycle %d, slow walk in flight: %v", i+1, err)
		}
		// The slow walk's goroutine reads its start from the clock once the cycle has let it
		// go: wait until it holds at the gate, past that read, before moving the clock on.
		if !poll(t, func() bool { return gate.Held() == 1 }) {
			t.FailNow()
		}
		clk.Add(10 * time.Second)
	}
	if n := gate.Held(); n != 1 {
		t.Errorf("%d walks of the slow volume were started in 3 cycles, want 1 (one in flight per volume)", n)
	}

	// The slow walk completes; the next cycle publishes it with its true age (it
	// started 30 s ago) and starts the next walk of it, slow again.
	gate.Release()
	if !poll(t, func() bool { return len(e.WalksRunning()) == 0 }) {
		t.FailNow()
	}
	cycle()
	want := `
# HELP emptydir_measurement_age_seconds Seconds between the measurement behind this volume's values and this scrape.
# TYPE emptydir_measurement_age_seconds gauge
emptydir_measurement_age_seconds{medium="disk",namespace="big",node="node-1",pod="hoarder",uid="uid-slow",volume="slow"} 30
emptydir_measurement_age_seconds{medium="disk",namespace="shop",node="node-1",pod="cart-0",uid="uid-cart",volume="cache"} 0
emptydir_measurement_age_seconds{medium="disk",namespace="web",node="node-1",pod="front",uid="uid-front",volume="tmp"} 0
`
	if err := testutil.CollectAndCompare(e, strings.NewReader(want), "emptydir_measurement_age_seconds"); err != nil {
		t.Errorf("after the slow walk completed: %v", err)
	}
}

// TestVolumeTimeoutEndsWalk: a walk that exceeds the volume timeout ends, counts
// as a timeout once, and the volume is walked again by a later cycle.
func TestVolumeTimeoutEndsWalk(t *testing.T) {
	clk := exportertest.NewClock(t0)
	pods := exportertest.NewPods(
		part.Pod{Namespace: "big", Pod: "hoarder", UID: "uid-slow", Parts: []part.Part{{Name: "slow", Medium: part.MediumDisk}}},
	)
	gate := exportertest.NewGate()
	src := newSlowSource(clk, gate, nil)
	e, err := exporter.New(exporter.TestConfig(exporter.Config{NodeName: "node-1", Source: src, Pods: pods, Now: clk.Now, VolumeTimeout: 50 * time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		e.Refresh(context.Background()) // waits for the walk, which its timeout ends
	}
	walks, ctxErr := gate.Held(), gate.Err()
	if walks != 2 || !errors.Is(ctxErr, context.DeadlineExceeded) {
		t.Errorf("%d walks, ended by %v; want 2 walks, each ended by its deadline", walks, ctxErr)
	}
	want := `
# HELP emptydir_exporter_measurement_errors_total Volumes that could not be measured, by source and reason.
# TYPE emptydir_exporter_measurement_errors_total counter
emptydir_exporter_measurement_errors_total{node="node-1",reason="io",source="filesystem"} 0
emptydir_exporter_measurement_errors_total{node="node-1",reason="not_found",source="filesystem"} 0
emptydir_exporter_measurement_errors_total{node="node-1",reason="permission",source="filesystem"} 0
emptydir_exporter_measurement_errors_total{node="node-1",reason="timeout",source="filesystem"} 2
`
	if err := testutil.CollectAndCompare(e, strings.NewReader(want), "emptydir_exporter_measurement_errors_total"); err != nil {
		t.Error(err)
	}
}

// poll waits until cond holds and reports whether it did; the bound only keeps a
// broken exporter from hanging the test. Safe from any goroutine.
func poll(t *testing.T, cond func() bool) bool {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Error("condition not reached")
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}

// TestUncheckedHardLinksCounted: a walk that ran out of hard-link memory says so in
// a counter, since its usage may be over-counted.
func TestUncheckedHardLinksCounted(t *testing.T) {
	pods, table, src, now := fixture()
	m := table.Get("uid-front", "tmp")
	m.UncheckedLinks = 7
	table.Set("uid-front", "tmp", m)
	e := newTestExporter(t, pods, src, now)
	e.Refresh(context.Background())
	e.Refresh(context.Background())
	if got := testutil.ToFloat64(e.UncheckedLinksCounter()); got != 14 {
		t.Errorf("emptydir_exporter_unchecked_hard_links_total = %v after two cycles with 7 each, want 14", got)
	}
}

// TestRunMeasuresAsSoonAsPodsSync: a (re)started exporter measures as soon as its pod
// informer has synced, not only one interval after an empty first cycle.
func TestRunMeasuresAsSoonAsPodsSync(t *testing.T) {
	pods, _, src, now := fixture()
	lister := pods.Unsynced()
	e := newTestExporterWith(t, exporter.Config{Source: src, Pods: lister, Now: func() time.Time { return *now }, Interval: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	time.Sleep(100 * time.Millisecond) // the first cycle's moment, before the sync
	lister.SetSynced(true)
	if !poll(t, func() bool { return testutil.CollectAndCount(e, "emptydir_used_bytes") == 3 }) {
		t.Fatal("with a 1h interval, the volumes must be measured once the informer has synced, not an hour later")
	}
}

// TestCutShortWalkPublishedAsLowerBound: a walk cut short by the volume timeout publishes what
// it counted, flagged incomplete, instead of nothing (a volume always slower than the timeout
// was never published); the timeout is still counted and the cycle did not measure every
// volume completely.
func TestCutShortWalkPublishedAsLowerBound(t *testing.T) {
	pods, table, src, now := fixture()
	m := table.Get("uid-cart", "cache")
	m.CutShort, m.ChangedDirectories = true, 1
	table.Set("uid-cart", "cache", m)
	e := newTestExporter(t, pods, src, now)
	e.Refresh(context.Background())

	want := `
# HELP emptydir_measurement_incomplete 1 while the volume's last measurement is a lower bound of its usage, by reason.
# TYPE emptydir_measurement_incomplete gauge
emptydir_measurement_incomplete{medium="disk",namespace="shop",node="node-1",pod="cart-0",reason="changed_during_walk",uid="uid-cart",volume="cache"} 1
emptydir_measurement_incomplete{medium="disk",namespace="shop",node="node-1",pod="cart-0",reason="cut_short",uid="uid-cart",volume="cache"} 1
emptydir_measurement_incomplete{medium="disk",namespace="web",node="node-1",pod="front",reason="unreadable",uid="uid-front",volume="tmp"} 1
# HELP emptydir_used_bytes Bytes the emptyDir volume uses: allocated blocks, hard-linked inodes once, symlinks not followed.
# TYPE emptydir_used_bytes gauge
emptydir_used_bytes{medium="disk",namespace="shop",node="node-1",pod="cart-0",uid="uid-cart",volume="cache"} 1.0244096e+07
emptydir_used_bytes{medium="disk",namespace="web",node="node-1",pod="front",uid="uid-front",volume="tmp"} 4096
emptydir_used_bytes{medium="memory",namespace="shop",node="node-1",pod="cart-0",uid="uid-cart",volume="scratch"} 2.048e+06
# HELP emptydir_exporter_collection_success 1 when the last collection cycle measured every volume without a failure, else 0.
# TYPE emptydir_exporter_collection_success gauge
emptydir_exporter_collection_success{node="node-1",source="filesystem"} 0
`
	if err := testutil.CollectAndCompare(e, strings.NewReader(want), "emptydir_measurement_incomplete", "emptydir_used_bytes",
		"emptydir_exporter_collection_success"); err != nil {
		t.Error(err)
	}
	if n := testutil.ToFloat64(e.MeasureErrorsCounter("filesystem", part.ReasonTimeout)); n != 1 {
		t.Errorf("%v timeouts counted, want 1: the walk was cut short", n)
	}
}
