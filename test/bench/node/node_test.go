package node

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/emptydir-guard/emptydir-guard/exporter"
	"github.com/emptydir-guard/emptydir-guard/internal/docsection"
)

// Environment knobs of BenchmarkNode (the package comment says what each does).
const (
	dirEnv     = "EMPTYDIR_GUARD_BENCH_DIR"
	steadyEnv  = "EMPTYDIR_GUARD_BENCH_STEADY"
	profileEnv = "EMPTYDIR_GUARD_BENCH_CPUPROFILE"
	smallEnv   = "EMPTYDIR_GUARD_BENCH_SMALL"
)

// params are a benchmark run's settings: the node's and the small check's.
type params struct {
	// scale divides every file count and size of the layout (nodeLayout).
	scale int
	// warmUp is how long each running exporter settles before it is measured: its first
	// cycles measure every part once, which a node pays when the exporter starts, not every
	// minute, and the CPU budget's bucket, full at the start, drains to what the walks leave
	// of it (the credit still held is reported and taken out of the walks' net share).
	warmUp time.Duration
	// writeAt is when, into a measured run, the first over-limit write comes; the others
	// follow writeEvery apart.
	writeAt time.Duration
	// steady is how long each running exporter is measured; minSteady the least it may be.
	steady, minSteady time.Duration
	// writeDoc: the report goes into docs/performance.md (the node's figures only).
	writeDoc bool
}

// publishBound is how long the benchmark waits for an over-limit write to be published: by
// the next cycle if the budget covers every guarded part, else once the volume has been
// deferred for the slow interval (schedule.Due's floor), plus the cycles that walk and publish it,
// and one for a busy machine. A write not published by then is reported as such.
var publishBound = defaults.unlimitedInterval + 3*defaultCycle

// writeEvery spaces the over-limit writes a cycle and a share of one apart, so that each comes
// at another phase of the cycle.
var writeEvery = defaultCycle + defaultCycle/time.Duration(len(overLimitPods))

// lastWriteAt is when, into a measured run, the last over-limit write comes.
func (p params) lastWriteAt() time.Duration {
	return p.writeAt + time.Duration(len(overLimitPods)-1)*writeEvery
}

func nodeParams() params {
	full := params{scale: 1, warmUp: 80 * time.Second, writeAt: 20 * time.Second, writeDoc: true}
	full.minSteady = full.lastWriteAt() + publishBound + defaultCycle
	if os.Getenv(smallEnv) == "" {
		return full
	}
	// A small node is walked within a cycle: each write is published by the next one.
	small := params{scale: 100, warmUp: 15 * time.Second, writeAt: 10 * time.Second}
	small.minSteady = small.lastWriteAt() + 3*defaultCycle
	return small
}

// Kubernetes' own cadences, for the peers' share of a core.
const (
	// kubeletPeriod is the kubelet's --volume-stats-agg-period: it walks every emptyDir once
	// per period (fs.DiskUsage, cached for the eviction manager and the Summary API).
	kubeletPeriod = time.Minute
	// containerdPeriod is containerd's CRI stats_collect_period: its snapshots syncer asks the
	// overlayfs snapshotter for the usage of every snapshot, which walks every active one's
	// upper directory (every running container's writable layer, limit or not).
	containerdPeriod = 10 * time.Second
)

// BenchmarkNode measures the exporter on one generated busy node (layout.go) against its
// peers in the same run, and writes the tables into docs/performance.md, section node:
//
//	cd test/bench && go test -run '^$' -bench '^BenchmarkNode$' -benchtime=1x -timeout 75m ./node/
func BenchmarkNode(b *testing.B) {
	pr := nodeParams()
	dir := os.Getenv(dirEnv)
	if dir == "" {
		dir = "/var/tmp/emptydir-guard-bench"
	}
	pr.steady = pr.minSteady
	if s := os.Getenv(steadyEnv); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < pr.minSteady {
			b.Fatalf("%s=%q: want a duration of at least %v", steadyEnv, s, pr.minSteady)
		}
		pr.steady = d
	}
	layout := nodeLayout(pr.scale)
	version := layoutVersion
	if pr.scale != 1 {
		version += fmt.Sprintf("-scale%d", pr.scale)
	}
	t, err := ensureTree(filepath.Join(dir, version), layout, b.Logf)
	if err != nil {
		b.Fatal(err)
	}
	pods := fixedPods(podVolumes(layout))
	// A run killed during its over-limit writes leaves their files behind: the tree must be as
	// generated, or a write would be seen before it is made.
	targets, err := overLimitTargets(t, pods)
	if err != nil {
		b.Fatal(err)
	}
	for _, o := range targets {
		if err := os.Remove(o.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			b.Fatal(err)
		}
	}

	for b.Loop() {
		pass, err := onePass(t, layout, pods)
		if err != nil {
			b.Fatal(err)
		}
		var runs []runResult
		schedules := append(append([]schedule{defaults, lowerBudget}, signalRuns...), everyInterval)
		for _, s := range schedules {
			r, err := run(b, t, pods, s, pr, s != everyInterval)
			if err != nil {
				b.Fatal(err)
			}
			runs = append(runs, r)
		}
		ours, old := runs[0], runs[len(runs)-1]
		peerShare := pass.peerShare()
		b.ReportMetric(ours.share*100, "ours-%core")
		b.ReportMetric(runs[1].share*100, "ours-4%budget-%core")
		b.ReportMetric(ours.share/old.share, "ours/old-cpu")
		b.ReportMetric(ours.share/peerShare, "ours/kubelet+containerd-cpu")
		b.ReportMetric(ours.publishedMedian().Seconds(), "over-limit-published-median-s")
		b.ReportMetric(percentile(ours.ages[classLayer], 0.9), "layer-age-p90-s")
		b.ReportMetric(percentile(ours.podAges, 0.9), "pod-total-age-p90-s")
		for _, r := range runs {
			if r.schedule.signal && r.schedule.writers == 0.1 {
				mode := "signal"
				if r.schedule.skip {
					mode = "signal-skip"
				}
				b.ReportMetric(r.share*100, mode+"-10%writers-%core")
				b.ReportMetric(r.share/ours.share, mode+"-10%writers/ours-cpu")
				b.ReportMetric(percentile(r.ages[classLayer], 0.9), mode+"-10%writers-layer-age-p90-s")
			}
		}
		body := report(statsOf(layout), pass, runs, pr)
		b.Log("\n" + body)
		if !b.Failed() && pr.writeDoc {
			if err := docsection.Replace(filepath.Join("..", "..", "..", "docs", "performance.md"), "node", "make bench-node", body); err != nil {
				b.Error(err)
			}
		}
	}
}

// passResult is one full pass over every part by ours and by the peers.
type passResult struct {
	ours usage
	// oursCPU is what ours' walks' threads counted in that pass, by class.
	oursCPU [numClasses]time.Duration
	// kubelet is the kubelet's fs.DiskUsage over every emptyDir; layers the same walk over
	// the writable layers ours measures (pods with a limit), otherLayers over the others',
	// which containerd walks too.
	kubelet, layers, otherLayers usage
	render                       time.Duration
	renderBytes                  int
	series                       int
}

// peer is the peers' pass over what ours walks: every emptyDir, the limited pods' layers.
func (p passResult) peer() usage { return p.kubelet.plus(p.layers) }

// kubeletShare and containerdShare are the peers' CPU at their cadences, of one core:
// the kubelet's walk of every emptyDir each minute, containerd's of every layer each 10 s.
func (p passResult) kubeletShare() float64 { return p.kubelet.cpu.Seconds() / kubeletPeriod.Seconds() }
func (p passResult) containerdShare() float64 {
	return (p.layers.cpu + p.otherLayers.cpu).Seconds() / containerdPeriod.Seconds()
}
func (p passResult) peerShare() float64 { return p.kubeletShare() + p.containerdShare() }

// onePass measures every part once with ours (one collection cycle with nothing deferred)
// and walks the same directories with the kubelet's fs.DiskUsage, then every other writable layer,
// four rounds alternating (the first warms the page cache) on a warm cache, and keeps the
// median CPU of each; ours and the peers must agree (verifyPass). Then it renders /metrics.
func onePass(t tree, layout []podSpec, pods fixedPods) (passResult, error) {
	var res passResult
	type oursRound struct {
		u   usage
		cpu [numClasses]time.Duration
	}
	var ours []oursRound
	var kubelet, layers, otherLayers []usage
	var last *node
	for round := range 4 {
		n, err := newNode(t, pods, everyInterval, false)
		if err != nil {
			return res, err
		}
		p := startProbe()
		n.exp.Refresh(context.Background())
		u := p.stop()
		walks, err := n.counter("emptydir_exporter_walk_cpu_seconds_total", "", "")
		if err != nil {
			return res, err
		}
		u.walkCPU = time.Duration(walks * float64(time.Second))
		_, cpu := n.source.counts()
		last = n

		var want peerTotals
		p = startProbe()
		if want.emptyDirBytes, want.emptyDirInodes, err = kubeletEmptyDirs(t, pods); err != nil {
			return res, err
		}
		ku := p.stop()
		p = startProbe()
		if want.layerBytes, err = peerLayers(t, layout, true); err != nil {
			return res, err
		}
		lu := p.stop()
		p = startProbe()
		if _, err = peerLayers(t, layout, false); err != nil {
			return res, err
		}
		ou := p.stop()
		if round > 0 { // round 0 warms the page cache
			ours = append(ours, oursRound{u, cpu})
			kubelet, layers, otherLayers = append(kubelet, ku), append(layers, lu), append(otherLayers, ou)
		}
		if want.logBytes, want.podFileBytes, err = fileTotals(t, layout); err != nil {
			return res, err
		}
		if err := verifyPass(n, layout, want); err != nil {
			return res, err
		}
	}
	o := medianBy(ours, func(r oursRound) time.Duration { return r.u.cpu })
	res.ours, res.oursCPU = o.u, o.cpu
	res.kubelet, res.layers, res.otherLayers = median(kubelet), median(layers), median(otherLayers)

	var renders []time.Duration
	for range 20 {
		start := time.Now()
		size, err := last.scrape()
		if err != nil {
			return res, err
		}
		renders = append(renders, time.Since(start))
		res.renderBytes = size
	}
	slices.Sort(renders)
	res.render = renders[len(renders)/2]
	used, _ := last.volumeValues("emptydir_used_bytes")
	res.series = len(used)
	return res, nil
}

// runResult is an exporter running at its intervals for a while.
type runResult struct {
	usage
	share  float64 // of one core
	cycles float64
	// published is, for each over-limit write, write → in the snapshot; -1: not within
	// publishBound. None in a run without the writes.
	published []time.Duration
	schedule  schedule
	// walks and walkCPU are the walks started in the window and the CPU charged to those
	// that ended in it, by class.
	walks   [numClasses]int64
	walkCPU [numClasses]time.Duration
	// deferredBudget and deferredSlot are the due walks deferred in the window, by reason.
	deferredBudget, deferredSlot float64
	// ages are the ages of every part at each sample, by class (countingSource.ages);
	// podAges the published emptydir_pod_ephemeral_storage_measurement_age_seconds of every
	// pod with a limit at each sample.
	ages    [numClasses][]float64
	podAges []float64
	samples int
	// creditStart, creditEnd: the CPU budget's credit at the start and end of the window,
	// which explain a share above the budget (credit saved before the window).
	creditStart, creditEnd float64
	// walkShare is the walks' CPU as their threads counted it (what the budget charges), of one core;
	// walkNetShare the same less the credit the window drew from before it (creditStart-creditEnd).
	walkShare, walkNetShare float64
	// ownCPU and ownAllocs are the benchmark's own over-limit write, polls for it and
	// freshness samples, left out of share and of the allocations per cycle.
	ownCPU    time.Duration
	ownAllocs uint64
	// cyclesRun is the collection cycles that ran in the window.
	cyclesRun float64
}

// run runs an exporter with schedule s as the command does at the chart's defaults (Run every
// interval; the trigger collector scraped every 5s, the rest every 30s, through the default
// metric filter) for pr.warmUp and then pr.steady, measured, sampling the age of every part at each
// scrape. With overLimit, a write past a limited volume's sizeLimit, pr.writeAt into the
// measured time, is timed until the exporter publishes it.
func run(b *testing.B, t tree, pods fixedPods, s schedule, pr params, overLimit bool) (runResult, error) {
	res := runResult{schedule: s}
	n, err := newNode(t, pods, s, true)
	if err != nil {
		return res, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); n.exp.Run(ctx) }()
	defer func() { cancel(); <-done }()
	scrapeErr := make(chan error, 1)
	go func() {
		tick := time.NewTicker(defaultScrape)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				scrapeErr <- nil
				return
			case <-tick.C:
				err := n.scrapeAsShipped(false)
				if i%int(defaultSlowScrape/defaultScrape) == 0 && err == nil {
					err = n.scrapeAsShipped(true)
				}
				if err != nil {
					scrapeErr <- err
					return
				}
			}
		}
	}()

	b.Logf("%s: warming up %v, then measuring %v", s.name, pr.warmUp, pr.steady)
	time.Sleep(pr.warmUp)
	budget0, err := n.counter("emptydir_exporter_walks_deferred_total", "reason", exporter.DeferredCPUBudget)
	if err != nil {
		return res, err
	}
	slot0, err := n.counter("emptydir_exporter_walks_deferred_total", "reason", exporter.DeferredNoSlot)
	if err != nil {
		return res, err
	}
	walks0, cpu0 := n.source.counts()
	charged0, err := n.counter("emptydir_exporter_walk_cpu_seconds_total", "", "")
	if err != nil {
		return res, err
	}
	if res.creditStart, err = n.gauge("emptydir_exporter_cpu_budget_remaining_seconds"); err != nil {
		return res, err
	}
	if path := os.Getenv(profileEnv); path != "" && s == defaults {
		stop, err := cpuProfile(path)
		if err != nil {
			return res, err
		}
		defer stop()
	}
	cycles0, err := n.cyclesRun()
	if err != nil {
		return res, err
	}
	p := startProbe()
	stopSampling := make(chan struct{})
	sampled := make(chan ageSamples, 1)
	go func() { sampled <- sample(n, pods, stopSampling) }()
	if overLimit {
		time.Sleep(pr.writeAt)
		var polls ownWork
		if res.published, polls, err = writeOverLimit(t, pods, n); err != nil {
			close(stopSampling)
			<-sampled
			return res, err
		}
		res.ownCPU, res.ownAllocs = res.ownCPU+polls.cpu, res.ownAllocs+polls.allocs
		time.Sleep(time.Until(p.wall.Add(pr.steady)))
	} else {
		time.Sleep(pr.steady)
	}
	close(stopSampling)
	as := <-sampled
	if as.err != nil {
		return res, as.err
	}
	res.ages, res.podAges, res.samples = as.ages, as.podAges, as.n
	res.ownCPU, res.ownAllocs = res.ownCPU+as.own.cpu, res.ownAllocs+as.own.allocs
	res.usage = p.stop()
	if res.creditEnd, err = n.gauge("emptydir_exporter_cpu_budget_remaining_seconds"); err != nil {
		return res, err
	}
	res.share = (res.cpu - res.ownCPU).Seconds() / res.wall.Seconds()
	charged, err := n.counter("emptydir_exporter_walk_cpu_seconds_total", "", "")
	if err != nil {
		return res, err
	}
	res.walkShare = (charged - charged0) / res.wall.Seconds()
	res.walkNetShare = (charged - charged0 - max(0, res.creditStart-res.creditEnd)) / res.wall.Seconds()
	res.cycles = res.wall.Seconds() / defaultCycle.Seconds()
	cycles, err := n.cyclesRun()
	if err != nil {
		return res, err
	}
	res.cyclesRun = cycles - cycles0
	walks, cpu := n.source.counts()
	for c := range numClasses {
		res.walks[c], res.walkCPU[c] = walks[c]-walks0[c], cpu[c]-cpu0[c]
	}
	budget, err := n.counter("emptydir_exporter_walks_deferred_total", "reason", exporter.DeferredCPUBudget)
	if err != nil {
		return res, err
	}
	slot, err := n.counter("emptydir_exporter_walks_deferred_total", "reason", exporter.DeferredNoSlot)
	if err != nil {
		return res, err
	}
	res.deferredBudget, res.deferredSlot = budget-budget0, slot-slot0
	cancel()
	if err := <-scrapeErr; err != nil {
		return res, err
	}
	return res, nil
}

// ageSamples are the ages sample took (runResult.ages, podAges), how many times, and what
// that took.
type ageSamples struct {
	ages    [numClasses][]float64
	podAges []float64
	n       int
	own     ownWork
	err     error
}

// ownWork is what the benchmark's own work took: the CPU on its (locked) thread, and the
// heap allocations the process made meanwhile, the exporter's few in that time included.
type ownWork struct {
	cpu    time.Duration
	allocs uint64
}

// measureOwn adds what f takes to o; the caller's goroutine is locked to its thread.
func (o *ownWork) measureOwn(f func() error) error {
	cpu, allocs := threadCPU(), heapAllocs()
	err := f()
	spent := threadCPU() - cpu
	o.cpu += spent
	o.allocs += heapAllocs() - allocs
	benchOwnCPU.Add(int64(spent))
	return err
}

// sample records, every defaultScrape until stop is closed, the age of every part of pods
// (by the source's record of its latest measurement) and the published age of every pod's
// total.
func sample(n *node, pods fixedPods, stop <-chan struct{}) ageSamples {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	tick := time.NewTicker(defaultScrape)
	defer tick.Stop()
	var s ageSamples
	for {
		select {
		case <-stop:
			return s
		case <-tick.C:
		}
		s.err = s.own.measureOwn(func() error {
			n.source.ages(pods, time.Now(), n.started, &s.ages)
			ms, err := n.collect("emptydir_pod_ephemeral_storage_measurement_age_seconds", n.seriesBound(pods))
			for _, m := range ms {
				s.podAges = append(s.podAges, m.GetGauge().GetValue())
			}
			return err
		})
		if s.err != nil {
			return s
		}
		s.n++
	}
}

// cyclesRun is the collection cycles the exporter has run so far.
func (n *node) cyclesRun() (float64, error) {
	ok, err := n.counter("emptydir_exporter_collections_total", "result", "success")
	if err != nil {
		return 0, err
	}
	failed, err := n.counter("emptydir_exporter_collections_total", "result", "error")
	return ok + failed, err
}

// seriesBound bounds the metrics one Collect of the exporter emits for pods.
func (n *node) seriesBound(pods fixedPods) int { return 16*pods.volumes() + 256 }

// writeOverLimit writes, writeEvery apart, 8 MiB more than its sizeLimit into the scratch
// volume of each of overLimitPods and returns how long the exporter takes to publish usage
// above each limit (-1: not within publishBound), and what the writes and the polls took. The
// files are removed afterwards, keeping the cached tree as generated.
func writeOverLimit(t tree, pods fixedPods, n *node) ([]time.Duration, ownWork, error) {
	var own ownWork
	targets, err := overLimitTargets(t, pods)
	if err != nil {
		return nil, own, err
	}
	for _, o := range targets {
		defer os.Remove(o.path)
	}
	// The writes' and the polls' CPU is the benchmark's, counted on this goroutine's thread.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	published := make([]time.Duration, len(targets))
	written := make([]time.Time, len(targets))
	start := time.Now()
	for {
		next := slices.Index(written, time.Time{})
		if next >= 0 && time.Since(start) >= time.Duration(next)*writeEvery {
			if err := own.measureOwn(func() error { return fill(targets[next]) }); err != nil {
				return nil, own, err
			}
			written[next] = time.Now()
		}
		pending := false
		var used map[string]float64
		for i, o := range targets {
			if written[i].IsZero() || published[i] != 0 {
				pending = pending || written[i].IsZero()
				continue
			}
			if time.Since(written[i]) >= publishBound {
				published[i] = -1 // not published within publishBound
				continue
			}
			if used == nil {
				if err := own.measureOwn(func() (err error) {
					used, err = n.usedBytesAll(n.seriesBound(pods))
					return err
				}); err != nil {
					return nil, own, err
				}
			}
			if used[o.key()] > float64(*o.volume.LimitBytes) {
				published[i] = time.Since(written[i])
				continue
			}
			pending = true
		}
		if !pending {
			return published, own, nil
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// fill writes 8 MiB more than its sizeLimit into o's file, synced.
func fill(o overLimitTarget) error {
	f, err := os.Create(o.path)
	if err != nil {
		return fmt.Errorf("over-limit write: %w", err)
	}
	chunk := make([]byte, 1<<20)
	for i := range chunk {
		chunk[i] = byte(i) // not sparse, not compressible
	}
	for range *o.volume.LimitBytes>>20 + 8 {
		if _, err := f.Write(chunk); err != nil {
			f.Close()
			return fmt.Errorf("over-limit write: %w", err)
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("over-limit write: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("over-limit write: %w", err)
	}
	return nil
}

// publishedMedian is the median of the run's over-limit writes' times to publish, one not
// published counting as the longest; 0 without writes.
func (r runResult) publishedMedian() time.Duration {
	if len(r.published) == 0 {
		return 0
	}
	ds := slices.Clone(r.published)
	for i, d := range ds {
		if d < 0 {
			ds[i] = time.Duration(math.MaxInt64)
		}
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}

func median(us []usage) usage {
	return medianBy(us, func(u usage) time.Duration { return u.cpu })
}

// medianBy is the element of xs with the median key.
func medianBy[T any](xs []T, key func(T) time.Duration) T {
	xs = slices.Clone(xs)
	slices.SortFunc(xs, func(a, b T) int { return cmp.Compare(key(a), key(b)) })
	return xs[len(xs)/2]
}

// percentile is the q-quantile of xs (nearest rank); 0 for none.
func percentile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}
