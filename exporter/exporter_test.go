package exporter

import (
	"context"
	"errors"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/emptydir-guard/emptydir-guard/internal/fswalk"
)

// collPods is a PodLister over a fixed list, for collector tests.
type collPods struct {
	mu     sync.Mutex
	pods   []PodVolumes
	synced bool
}

func (p *collPods) List() ([]PodVolumes, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]PodVolumes(nil), p.pods...), nil
}

func (p *collPods) Get(ns, name string) (PodVolumes, bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pv := range p.pods {
		if pv.Namespace == ns && pv.Pod == name {
			return pv, true, nil
		}
	}
	return PodVolumes{}, false, nil
}

func (p *collPods) HasSynced() bool { return p.synced }

// collSource answers from a table keyed by uid/volume, and fails the volumes in
// failing, as a real source reports per volume.
type collSource struct {
	byVolume map[volumeKey]Measurement
	failing  map[volumeKey]error
}

func (s *collSource) Name() string { return "filesystem" }

func (s *collSource) Measure(ctx context.Context, pods []PodVolumes) []VolumeResult {
	return measureEach(ctx, pods, s.MeasureVolume)
}

// MeasureVolume makes collSource a VolumeSource, measured as the filesystem source is.
func (s *collSource) MeasureVolume(_ context.Context, p PodVolumes, v Volume, _ *fswalk.CPUMeter) (Measurement, error) {
	k := volumeKey{p.UID, v.Name}
	if err := s.failing[k]; err != nil {
		return Measurement{}, err
	}
	return s.byVolume[k], nil
}

func limit(b int64) *int64 { return &b }

var t0 = time.Date(2026, 12, 2, 17, 0, 0, 0, time.UTC)

// fixture: two pods, three volumes, numbers measured 3s before the clock.
func fixture() (*collPods, *collSource, *time.Time) {
	pods := &collPods{synced: true, pods: []PodVolumes{
		{Namespace: "shop", Pod: "cart-0", UID: "uid-cart", Volumes: []Volume{
			{Name: "cache", Medium: MediumDisk, LimitBytes: limit(1 << 20)},
			{Name: "scratch", Medium: MediumMemory},
		}},
		{Namespace: "web", Pod: "front", UID: "uid-front", Volumes: []Volume{
			{Name: "tmp", Medium: MediumDisk, LimitBytes: limit(10 << 20)},
		}},
	}}
	at := t0.Add(-3 * time.Second)
	src := &collSource{byVolume: map[volumeKey]Measurement{
		{"uid-cart", "cache"}:   {UsedBytes: 10244096, CapacityBytes: 100 << 30, AvailableBytes: 40 << 30, InodesUsed: 2, MeasuredAt: at, Method: MethodWalk},
		{"uid-cart", "scratch"}: {UsedBytes: 2048000, CapacityBytes: 64 << 20, AvailableBytes: 62 << 20, InodesUsed: 3, MeasuredAt: at, Method: MethodWalk},
		{"uid-front", "tmp"}:    {UsedBytes: 4096, CapacityBytes: 100 << 30, AvailableBytes: 40 << 30, InodesUsed: 1, UnreadableEntries: 2, MeasuredAt: at, Method: MethodProjectQuota},
	}}
	now := t0
	return pods, src, &now
}

func newTestExporter(t *testing.T, pods PodLister, src Source, now *time.Time) *Exporter {
	t.Helper()
	e, err := New(testConfig(Config{NodeName: "node-1", Source: src, Pods: pods, Now: func() time.Time { return *now },
		CPUBudget: 0.05}))
	if err != nil {
		t.Fatal(err)
	}
	if e.walks != nil {
		e.walks.informerLag = 50 * time.Millisecond // the test's pod lister is never late
	}
	return e
}

func TestCollectGolden(t *testing.T) {
	pods, src, now := fixture()
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
	pods, src, now := fixture()
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
	pods, src, now := fixture()
	e := newTestExporter(t, pods, src, now)
	e.Refresh(context.Background())
	if n := testutil.CollectAndCount(e, "emptydir_used_bytes"); n != 3 {
		t.Fatalf("before deletion: %d used series, want 3", n)
	}
	pods.mu.Lock()
	pods.pods = pods.pods[1:] // shop/cart-0 is deleted
	pods.mu.Unlock()
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
	pods, src, now := fixture()
	e := newTestExporter(t, pods, src, now)
	e.Refresh(context.Background())

	*now = now.Add(30 * time.Second)
	for k, m := range src.byVolume { // the others are re-measured 3 s before the scrape
		m.MeasuredAt = now.Add(-3 * time.Second)
		src.byVolume[k] = m
	}
	src.failing = map[volumeKey]error{
		{"uid-cart", "cache"}: &MeasureError{Reason: ReasonPermission, Err: os.ErrPermission},
	}
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
# HELP emptydir_exporter_collection_success 1 when the last collection cycle had a measurement of every volume (but a volume without a sizeLimit awaiting its first slow-cadence walk) and none's latest measurement failed, else 0.
# TYPE emptydir_exporter_collection_success gauge
emptydir_exporter_collection_success{node="node-1",source="filesystem"} 0
# HELP emptydir_exporter_last_success_timestamp_seconds Unix time of the last fully successful collection cycle.
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
	pods, src, now := fixture()
	pods.synced = false
	e := newTestExporter(t, pods, src, now)
	e.Refresh(context.Background())
	want := `
# HELP emptydir_exporter_collection_success 1 when the last collection cycle had a measurement of every volume (but a volume without a sizeLimit awaiting its first slow-cadence walk) and none's latest measurement failed, else 0.
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
	if _, err := New(Config{NodeName: "n"}); err == nil {
		t.Error("New without Source and Pods succeeded")
	}
}

func TestReasonOf(t *testing.T) {
	cases := map[string]error{
		ReasonNotFound:   fsError(os.ErrNotExist),
		ReasonPermission: fsError(os.ErrPermission),
		ReasonIO:         errors.New("disk on fire"),
	}
	for want, err := range cases {
		if got := reasonOf(err); got != want {
			t.Errorf("reasonOf(%v) = %q, want %q", err, got, want)
		}
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

	pods, src, now := fixture()
	e := newTestExporter(t, pods, src, now)
	ch := make(chan *prometheus.Desc, 64)
	e.Describe(ch)
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

// clock is a settable clock safe to read from walks in flight.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// slowSource is a VolumeSource on which the volume "slow" blocks until released or
// its context ends, as a huge or hostile volume's walk does; the others answer at
// once, stamped with the clock. fastDone is called after each fast measurement.
type slowSource struct {
	clock    *clock
	release  chan struct{}
	fastDone func()

	mu         sync.Mutex
	slowWalks  int
	slowCtxErr error
}

func (s *slowSource) Name() string { return "filesystem" }

func (s *slowSource) Measure(ctx context.Context, pods []PodVolumes) []VolumeResult {
	return measureEach(ctx, pods, s.MeasureVolume)
}

func (s *slowSource) MeasureVolume(ctx context.Context, _ PodVolumes, v Volume, _ *fswalk.CPUMeter) (Measurement, error) {
	start := s.clock.Now()
	if v.Name == "slow" {
		s.mu.Lock()
		s.slowWalks++
		s.mu.Unlock()
		select {
		case <-s.release:
		case <-ctx.Done():
			s.mu.Lock()
			s.slowCtxErr = ctx.Err()
			s.mu.Unlock()
			return Measurement{}, fsError(ctx.Err())
		}
		return Measurement{UsedBytes: 1 << 30, MeasuredAt: start, CompletedAt: s.clock.Now()}, nil
	}
	if err := ctx.Err(); err != nil { // a real walk stops when its context ends
		return Measurement{}, fsError(err)
	}
	defer s.fastDone()
	return Measurement{UsedBytes: 4096, MeasuredAt: start, CompletedAt: start}, nil
}

// TestSlowVolumeDoesNotStarveOthers: a volume whose walk takes longer than the
// interval must not keep the other volumes of the node from being measured every
// cycle, and its own staleness must show in its age.
func TestSlowVolumeDoesNotStarveOthers(t *testing.T) {
	clk := &clock{t: t0}
	pods := &collPods{synced: true, pods: []PodVolumes{
		{Namespace: "big", Pod: "hoarder", UID: "uid-slow", Volumes: []Volume{{Name: "slow", Medium: MediumDisk}}},
		{Namespace: "shop", Pod: "cart-0", UID: "uid-cart", Volumes: []Volume{{Name: "cache", Medium: MediumDisk}}},
		{Namespace: "web", Pod: "front", UID: "uid-front", Volumes: []Volume{{Name: "tmp", Medium: MediumDisk}}},
	}}
	var fastCount atomic.Int32
	src := &slowSource{clock: clk, release: make(chan struct{}), fastDone: func() { fastCount.Add(1) }}
	e, err := New(testConfig(Config{NodeName: "node-1", Source: src, Pods: pods, Now: clk.Now, VolumeConcurrency: 2}))
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
				e.walks.mu.Lock()
				defer e.walks.mu.Unlock()
				_, slow := e.walks.running[volumeKey{"uid-slow", "slow"}]
				return fastCount.Load() == 2 && len(e.walks.running) == 1 && slow
			})
		}()
		e.refresh(ctx, walks, 0)
	}

	for i := range 3 {
		cycle()
		want := `
# HELP emptydir_measurement_age_seconds Seconds between the measurement behind this volume's values and this scrape.
# TYPE emptydir_measurement_age_seconds gauge
emptydir_measurement_age_seconds{medium="disk",namespace="shop",node="node-1",pod="cart-0",uid="uid-cart",volume="cache"} 0
emptydir_measurement_age_seconds{medium="disk",namespace="web",node="node-1",pod="front",uid="uid-front",volume="tmp"} 0
# HELP emptydir_exporter_collection_success 1 when the last collection cycle had a measurement of every volume (but a volume without a sizeLimit awaiting its first slow-cadence walk) and none's latest measurement failed, else 0.
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
		clk.Add(10 * time.Second)
	}
	src.mu.Lock()
	if src.slowWalks != 1 {
		t.Errorf("%d walks of the slow volume were started in 3 cycles, want 1 (one in flight per volume)", src.slowWalks)
	}
	src.mu.Unlock()

	// The slow walk completes; the next cycle publishes it with its true age (it
	// started 30 s ago) and starts the next walk of it, slow again.
	src.release <- struct{}{}
	if !poll(t, func() bool { e.walks.mu.Lock(); defer e.walks.mu.Unlock(); return len(e.walks.running) == 0 }) {
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
	clk := &clock{t: t0}
	pods := &collPods{synced: true, pods: []PodVolumes{
		{Namespace: "big", Pod: "hoarder", UID: "uid-slow", Volumes: []Volume{{Name: "slow", Medium: MediumDisk}}},
	}}
	src := &slowSource{clock: clk, release: make(chan struct{}), fastDone: func() {}}
	e, err := New(testConfig(Config{NodeName: "node-1", Source: src, Pods: pods, Now: clk.Now, VolumeTimeout: 50 * time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		e.Refresh(context.Background()) // waits for the walk, which its timeout ends
	}
	src.mu.Lock()
	walks, ctxErr := src.slowWalks, src.slowCtxErr
	src.mu.Unlock()
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
	pods, src, now := fixture()
	m := src.byVolume[volumeKey{"uid-front", "tmp"}]
	m.UncheckedLinks = 7
	src.byVolume[volumeKey{"uid-front", "tmp"}] = m
	e := newTestExporter(t, pods, src, now)
	e.Refresh(context.Background())
	e.Refresh(context.Background())
	if got := testutil.ToFloat64(e.uncheckedLinks); got != 14 {
		t.Errorf("emptydir_exporter_unchecked_hard_links_total = %v after two cycles with 7 each, want 14", got)
	}
}

// syncsLater is a PodLister whose informer syncs when the test says so.
type syncsLater struct {
	*collPods
	synced atomic.Bool
}

func (p *syncsLater) HasSynced() bool { return p.synced.Load() }

// TestRunMeasuresAsSoonAsPodsSync: a (re)started exporter measures as soon as its pod
// informer has synced, not only one interval after an empty first cycle.
func TestRunMeasuresAsSoonAsPodsSync(t *testing.T) {
	pods, src, now := fixture()
	lister := &syncsLater{collPods: pods}
	e := newTestExporter(t, lister, src, now)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	e.cfg.Interval = time.Hour
	go func() { e.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	time.Sleep(100 * time.Millisecond) // the first cycle's moment, before the sync
	lister.synced.Store(true)
	if !poll(t, func() bool { return testutil.CollectAndCount(e, "emptydir_used_bytes") == 3 }) {
		t.Fatal("with a 1h interval, the volumes must be measured once the informer has synced, not an hour later")
	}
}

// TestCutShortWalkPublishedAsLowerBound: a walk cut short by the volume timeout publishes what
// it counted, flagged incomplete, instead of nothing (a volume always slower than the timeout
// was never published); the timeout is still counted and the cycle did not measure every
// volume completely.
func TestCutShortWalkPublishedAsLowerBound(t *testing.T) {
	pods, src, now := fixture()
	k := volumeKey{"uid-cart", "cache"}
	m := src.byVolume[k]
	m.CutShort, m.ChangedFolders = true, 1
	src.byVolume[k] = m
	e := newTestExporter(t, pods, src, now)
	e.Refresh(context.Background())

	want := `
# HELP emptydir_measurement_incomplete 1 when the last measurement missed part of the volume (unreadable entries, folders changed while it walked, or a walk cut short), so emptydir_used_bytes is a lower bound; else 0.
# TYPE emptydir_measurement_incomplete gauge
emptydir_measurement_incomplete{medium="disk",namespace="shop",node="node-1",pod="cart-0",uid="uid-cart",volume="cache"} 1
emptydir_measurement_incomplete{medium="disk",namespace="web",node="node-1",pod="front",uid="uid-front",volume="tmp"} 1
emptydir_measurement_incomplete{medium="memory",namespace="shop",node="node-1",pod="cart-0",uid="uid-cart",volume="scratch"} 0
# HELP emptydir_used_bytes Bytes the emptyDir volume uses: allocated blocks, hard-linked inodes once, symlinks not followed.
# TYPE emptydir_used_bytes gauge
emptydir_used_bytes{medium="disk",namespace="shop",node="node-1",pod="cart-0",uid="uid-cart",volume="cache"} 1.0244096e+07
emptydir_used_bytes{medium="disk",namespace="web",node="node-1",pod="front",uid="uid-front",volume="tmp"} 4096
emptydir_used_bytes{medium="memory",namespace="shop",node="node-1",pod="cart-0",uid="uid-cart",volume="scratch"} 2.048e+06
# HELP emptydir_exporter_collection_success 1 when the last collection cycle had a measurement of every volume (but a volume without a sizeLimit awaiting its first slow-cadence walk) and none's latest measurement failed, else 0.
# TYPE emptydir_exporter_collection_success gauge
emptydir_exporter_collection_success{node="node-1",source="filesystem"} 0
`
	if err := testutil.CollectAndCompare(e, strings.NewReader(want), "emptydir_measurement_incomplete", "emptydir_used_bytes",
		"emptydir_exporter_collection_success"); err != nil {
		t.Error(err)
	}
	if n := testutil.ToFloat64(e.measureErrors.WithLabelValues("filesystem", ReasonTimeout)); n != 1 {
		t.Errorf("%v timeouts counted, want 1: the walk was cut short", n)
	}
}
