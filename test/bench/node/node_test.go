package node

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/emptydir-guard/emptydir-guard/exporter"
	"github.com/emptydir-guard/emptydir-guard/exporter/exportertest"
	"github.com/emptydir-guard/emptydir-guard/internal/docsection"
	"github.com/emptydir-guard/emptydir-guard/test/bench/peers"
)

// Environment knobs of BenchmarkNode.
const (
	dirEnv     = "EMPTYDIR_GUARD_BENCH_DIR"        // where the node's tree is kept (default /var/tmp/emptydir-guard-bench)
	steadyEnv  = "EMPTYDIR_GUARD_BENCH_STEADY"     // how long each exporter runs at its intervals (default 2m)
	profileEnv = "EMPTYDIR_GUARD_BENCH_CPUPROFILE" // a file for the CPU profile of the defaults' measured window
)

// minSteady is the shortest measured run: the over-limit write comes writeAt into it, and is
// published within publishBound.
var minSteady = writeAt + publishBound + defaultCycle

// writeAt is when, into a measured run, the over-limit write comes.
const writeAt = 20 * time.Second

// publishBound is the longest an over-limit write may take to be published: by the next
// cycle if the budget covers every limited volume, else once the volume has been deferred for
// the slow interval (dueWalks), plus the cycle that walks it.
var publishBound = defaults.unlimitedInterval + 2*defaultCycle

// warmUp is how long each running exporter settles before it is measured: its first cycles
// measure every volume once, which a node pays when the exporter starts, not every minute,
// and the CPU budget's bucket, full at the start, drains to what the walks leave of it
// (the credit still held is reported and taken out of the walks' net share).
const warmUp = 80 * time.Second

// overLimit is the volume the benchmark writes past its sizeLimit while ours runs: a
// scratch volume far from its limit until then, so that nearest-to-limit first walks it last.
const overLimitPod = "app-077"

// BenchmarkNode measures the exporter on one generated busy node (layout.go) against its
// peers in the same run, and writes the tables into docs/performance.md, section node:
//
//	cd test/bench && go test -run '^$' -bench '^BenchmarkNode$' -benchtime=1x -timeout 30m ./node/
func BenchmarkNode(b *testing.B) {
	dir := os.Getenv(dirEnv)
	if dir == "" {
		dir = "/var/tmp/emptydir-guard-bench"
	}
	steady := minSteady
	if s := os.Getenv(steadyEnv); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < minSteady {
			b.Fatalf("%s=%q: want a duration of at least %v", steadyEnv, s, minSteady)
		}
		steady = d
	}
	layout := nodeLayout()
	kubeletRoot, err := ensureTree(dir, layout, b.Logf)
	if err != nil {
		b.Fatal(err)
	}
	pods := fixedPods(podVolumes(layout))
	// A run killed during its over-limit write leaves the file behind: the tree must be as
	// generated, or the write would be seen before it is made.
	_, leftover, err := overLimitTarget(kubeletRoot, pods)
	if err != nil {
		b.Fatal(err)
	}
	if err := os.Remove(leftover); err != nil && !errors.Is(err, fs.ErrNotExist) {
		b.Fatal(err)
	}

	for b.Loop() {
		pass, err := onePass(kubeletRoot, pods)
		if err != nil {
			b.Fatal(err)
		}
		var runs []runResult
		for _, s := range []schedule{defaults, lowerBudget, everyInterval} {
			r, err := run(b, kubeletRoot, pods, s, steady, s != everyInterval)
			if err != nil {
				b.Fatal(err)
			}
			runs = append(runs, r)
		}
		ours, old := runs[0], runs[2]
		kubeletShare := pass.kubelet.cpu.Seconds() / time.Minute.Seconds()
		b.ReportMetric(ours.share*100, "ours-%core")
		b.ReportMetric(runs[1].share*100, "ours-4%budget-%core")
		b.ReportMetric(ours.share/old.share, "ours/old-cpu")
		b.ReportMetric(ours.share/kubeletShare, "ours/kubelet-cpu")
		b.ReportMetric(ours.published.Seconds(), "over-limit-published-s")
		body := report(pass, runs, kubeletShare, steady)
		b.Log("\n" + body)
		if !b.Failed() {
			if err := docsection.Replace(filepath.Join("..", "..", "..", "docs", "performance.md"), "node", "make bench-node", body); err != nil {
				b.Error(err)
			}
		}
	}
}

// passResult is one full pass over every volume by ours and by the kubelet's walk.
type passResult struct {
	ours, kubelet usage
	render        time.Duration
	renderBytes   int
	series        int
}

// onePass walks every volume once with ours (one collection cycle with nothing deferred) and
// with the kubelet's fs.DiskUsage, three times alternating on a warm cache, and keeps the
// median CPU of each; the two must agree on bytes and inodes. Then it renders /metrics.
func onePass(kubeletRoot string, pods fixedPods) (passResult, error) {
	var res passResult
	var ours, kubelet []usage
	var last *node
	for round := range 4 {
		n, err := newNode(kubeletRoot, pods, everyInterval)
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
		if round > 0 { // round 0 warms the page cache
			ours = append(ours, u)
		}
		last = n

		var kb, ki int64
		p = startProbe()
		for _, pv := range pods {
			for _, v := range pv.Volumes {
				ku, err := peers.Kubelet(exporter.Dir(kubeletRoot, pv.UID, v.Name))
				if err != nil {
					return res, err
				}
				kb, ki = kb+ku.Bytes, ki+ku.Inodes
			}
		}
		u = p.stop()
		if round > 0 {
			kubelet = append(kubelet, u)
		}
		used, err := n.volumeValues("emptydir_used_bytes")
		if err != nil {
			return res, err
		}
		inodes, err := n.volumeValues("emptydir_inodes_used")
		if err != nil {
			return res, err
		}
		if ob, oi := sum(used), sum(inodes); int64(ob) != kb || int64(oi) != ki || len(used) != pods.volumes() {
			return res, fmt.Errorf("ours %d volumes, %.0f bytes, %.0f inodes; kubelet %d bytes, %d inodes", len(used), ob, oi, kb, ki)
		}
	}
	res.ours, res.kubelet = median(ours), median(kubelet)

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
	share                        float64 // of one core
	cycles                       float64
	walksLimited, walksUnlimited int64
	deferred                     float64
	maxAgeLimited, maxAgeOther   float64
	published                    time.Duration // write over the limit → in the snapshot
	schedule                     schedule
	// creditStart, creditEnd: the CPU budget's credit at the start and end of the window,
	// which explain a share above the budget (credit saved before the window).
	creditStart, creditEnd float64
	// walkShare is the walks' CPU as their threads counted it (what the budget charges), of one core;
	// walkNetShare the same less the credit the window drew from before it (creditStart-creditEnd).
	walkShare, walkNetShare float64
	// pollCPU is the benchmark's own over-limit write and polls for it, left out of share.
	pollCPU time.Duration
}

// run runs an exporter with schedule s as the command does (Run every interval, a scrape every
// 30s) for warmUp and then steady, measured. With overLimit, a write past a limited volume's
// sizeLimit, a third into the measured time and half a cycle after a cycle began (neither
// its best nor its worst moment), is timed until the exporter publishes it.
func run(b *testing.B, kubeletRoot string, pods fixedPods, s schedule, steady time.Duration, overLimit bool) (runResult, error) {
	res := runResult{schedule: s}
	n, err := newNode(kubeletRoot, pods, s)
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
		t := time.NewTicker(defaultScrape)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				scrapeErr <- nil
				return
			case <-t.C:
				if _, err := n.scrape(); err != nil {
					scrapeErr <- err
					return
				}
			}
		}
	}()

	b.Logf("%s: warming up %v, then measuring %v", s.name, warmUp, steady)
	time.Sleep(warmUp)
	deferred0, err := n.counter("emptydir_exporter_walks_deferred_total", "reason", exporter.DeferredCPUBudget)
	if err != nil {
		return res, err
	}
	lim0, unl0 := n.source.limited.Load(), n.source.unlimited.Load()
	walks0, err := n.counter("emptydir_exporter_walk_cpu_seconds_total", "", "")
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
	p := startProbe()
	if overLimit {
		time.Sleep(writeAt)
		if res.published, res.pollCPU, err = writeOverLimit(kubeletRoot, pods, n); err != nil {
			return res, err
		}
		time.Sleep(time.Until(p.wall.Add(steady)))
	} else {
		time.Sleep(steady)
	}
	res.usage = p.stop()
	if res.creditEnd, err = n.gauge("emptydir_exporter_cpu_budget_remaining_seconds"); err != nil {
		return res, err
	}
	res.share = (res.cpu - res.pollCPU).Seconds() / res.wall.Seconds()
	walks, err := n.counter("emptydir_exporter_walk_cpu_seconds_total", "", "")
	if err != nil {
		return res, err
	}
	res.walkShare = (walks - walks0) / res.wall.Seconds()
	res.walkNetShare = (walks - walks0 - max(0, res.creditStart-res.creditEnd)) / res.wall.Seconds()
	res.cycles = res.wall.Seconds() / defaultCycle.Seconds()
	res.walksLimited, res.walksUnlimited = n.source.limited.Load()-lim0, n.source.unlimited.Load()-unl0
	deferred, err := n.counter("emptydir_exporter_walks_deferred_total", "reason", exporter.DeferredCPUBudget)
	if err != nil {
		return res, err
	}
	res.deferred = deferred - deferred0
	ages, err := n.volumeValues("emptydir_measurement_age_seconds")
	if err != nil {
		return res, err
	}
	limits, err := n.volumeValues("emptydir_limit_bytes")
	if err != nil {
		return res, err
	}
	for k, age := range ages {
		if _, limited := limits[k]; limited {
			res.maxAgeLimited = max(res.maxAgeLimited, age)
		} else {
			res.maxAgeOther = max(res.maxAgeOther, age)
		}
	}
	cancel()
	if err := <-scrapeErr; err != nil {
		return res, err
	}
	return res, nil
}

// overLimitTarget is the volume writeOverLimit fills and the file it writes there.
func overLimitTarget(kubeletRoot string, pods fixedPods) (exporter.Volume, string, error) {
	pv, ok, _ := exportertest.NewPods(pods...).Get("bench", overLimitPod)
	if !ok {
		return exporter.Volume{}, "", fmt.Errorf("pod %s not in the layout", overLimitPod)
	}
	for _, v := range pv.Volumes {
		if v.Name == limitedVolume {
			return v, filepath.Join(exporter.Dir(kubeletRoot, pv.UID, v.Name), "over-limit"), nil
		}
	}
	return exporter.Volume{}, "", fmt.Errorf("pod %s has no volume %s", overLimitPod, limitedVolume)
}

// writeOverLimit writes 8 MiB more than its sizeLimit into the scratch volume of overLimitPod
// and returns how long the exporter takes to publish usage above the limit, and the CPU the
// write and the polls took. The file is removed afterwards, keeping the cached tree as generated.
func writeOverLimit(kubeletRoot string, pods fixedPods, n *node) (time.Duration, time.Duration, error) {
	vol, path, err := overLimitTarget(kubeletRoot, pods)
	if err != nil {
		return 0, 0, err
	}
	defer os.Remove(path)
	// The write's and the polls' CPU is the benchmark's, counted on this goroutine's thread.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	own := threadCPU()
	f, err := os.Create(path)
	if err != nil {
		return 0, 0, fmt.Errorf("over-limit write: %w", err)
	}
	chunk := make([]byte, 1<<20)
	for i := range chunk {
		chunk[i] = byte(i) // not sparse, not compressible
	}
	for range *vol.LimitBytes>>20 + 8 {
		if _, err := f.Write(chunk); err != nil {
			f.Close()
			return 0, 0, fmt.Errorf("over-limit write: %w", err)
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return 0, 0, fmt.Errorf("over-limit write: %w", err)
	}
	if err := f.Close(); err != nil {
		return 0, 0, fmt.Errorf("over-limit write: %w", err)
	}
	written := time.Now()
	key := overLimitPod + "/" + vol.Name
	polls := threadCPU() - own
	for time.Since(written) < publishBound {
		used, cpu, err := n.usedBytes(key, 16*pods.volumes())
		if err != nil {
			return 0, 0, err
		}
		polls += cpu
		if used > float64(*vol.LimitBytes) {
			return time.Since(written), polls, nil
		}
		time.Sleep(250 * time.Millisecond)
	}
	return 0, 0, fmt.Errorf("the write past %s's limit was not published within %v", key, publishBound)
}

func report(pass passResult, runs []runResult, kubeletShare float64, steady time.Duration) string {
	var w strings.Builder
	fmt.Fprintf(&w, "110 pods × 3 emptyDirs, 1,000,100 files, 121 volumes with a sizeLimit (149,600 files); warm page cache; %d cores, load average %s at the end; Go %s.\n\n",
		numCPU(), loadAverage(), goVersion())
	fmt.Fprintf(&w, "One pass over every volume (median of 3):\n\n")
	fmt.Fprintf(&w, "| per pass | ours (one collection cycle) | kubelet `fs.DiskUsage` | ours/kubelet |\n| --- | --- | --- | --- |\n")
	row := func(name string, o, k float64, unit func(float64) string) {
		fmt.Fprintf(&w, "| %s | %s | %s | %.2f |\n", name, unit(o), unit(k), o/k)
	}
	row("wall", pass.ours.wall.Seconds(), pass.kubelet.wall.Seconds(), seconds)
	row("CPU", pass.ours.cpu.Seconds(), pass.kubelet.cpu.Seconds(), seconds)
	row("allocations", float64(pass.ours.mallocs), float64(pass.kubelet.mallocs), count)
	row("allocated bytes", float64(pass.ours.allocBytes), float64(pass.kubelet.allocBytes), mib)
	row("peak RSS of the process", float64(pass.ours.peakRSSByte), float64(pass.kubelet.peakRSSByte), mib)
	fmt.Fprintf(&w, "\nOf ours' CPU per pass, the walks' threads counted %s (%.0f %%: what the CPU budget charges); the rest is the runtime (garbage collection on other threads), the cycle's bookkeeping and the probe's own `runtime.GC`.\n",
		seconds(pass.ours.walkCPU.Seconds()), 100*pass.ours.walkCPU.Seconds()/pass.ours.cpu.Seconds())
	fmt.Fprintf(&w, "\n`/metrics` after the pass (%d volumes, with the Go and process collectors): rendered in %s (median of 20), %s.\n\n",
		pass.series, seconds(pass.render.Seconds()), kib(float64(pass.renderBytes)))

	ours, old := runs[0], runs[len(runs)-1]
	fmt.Fprintf(&w, "Each exporter running for %s after %s of warm-up, interval %s aligned to a gzip-compressed scrape every %s (the shipped monitors'); the process's CPU leaves out the benchmark's own over-limit write and its polls for it (%s in the defaults' window, counted on their thread). The kubelet's share is its CPU per pass (above) once per its 1m `--volume-stats-agg-period`. Ratios: ours at the defaults against each peer.\n\n",
		steady, warmUp, defaultCycle, defaultScrape, seconds(ours.pollCPU.Seconds()))
	fmt.Fprintf(&w, "| running |")
	for _, r := range runs {
		fmt.Fprintf(&w, " %s |", r.schedule.name)
	}
	fmt.Fprintf(&w, " kubelet | ours/before | ours/kubelet |\n|%s\n", strings.Repeat(" --- |", len(runs)+4))
	line := func(name string, cell func(runResult) string, kubelet, vsOld, vsKubelet string) {
		fmt.Fprintf(&w, "| %s |", name)
		for _, r := range runs {
			fmt.Fprintf(&w, " %s |", cell(r))
		}
		fmt.Fprintf(&w, " %s | %s | %s |\n", kubelet, vsOld, vsKubelet)
	}
	ratio := func(a, b float64) string { return fmt.Sprintf("%.2f", a/b) }
	perCycle := func(v float64, r runResult) float64 { return v / r.cycles }
	line("CPU of the process, share of one core (target ≤ 5 %)", func(r runResult) string { return fmt.Sprintf("%.1f %%", r.share*100) },
		fmt.Sprintf("%.1f %%", kubeletShare*100), ratio(ours.share, old.share), ratio(ours.share, kubeletShare))
	line("of which the walks, as the budget charges them", func(r runResult) string { return fmt.Sprintf("%.1f %%", r.walkShare*100) },
		"", ratio(ours.walkShare, old.walkShare), "")
	line("the walks less the credit drawn from before the window", func(r runResult) string { return fmt.Sprintf("%.1f %%", r.walkNetShare*100) },
		"", "", "")
	line("the process less that credit (steady state)", func(r runResult) string {
		return fmt.Sprintf("%.1f %%", (r.share-(r.walkShare-r.walkNetShare))*100)
	}, "", "", "")
	line(fmt.Sprintf("CPU per %s cycle", defaultCycle), func(r runResult) string { return seconds(perCycle(r.cpu.Seconds(), r)) },
		"", ratio(perCycle(ours.cpu.Seconds(), ours), perCycle(old.cpu.Seconds(), old)), "")
	line("allocations per cycle", func(r runResult) string { return count(perCycle(float64(r.mallocs), r)) },
		"", ratio(perCycle(float64(ours.mallocs), ours), perCycle(float64(old.mallocs), old)), "")
	line("peak RSS of the process", func(r runResult) string { return mib(float64(r.peakRSSByte)) },
		"", ratio(float64(ours.peakRSSByte), float64(old.peakRSSByte)), "")
	line("walks per minute, limited / others", func(r runResult) string {
		return fmt.Sprintf("%.0f / %.0f", float64(r.walksLimited)/r.wall.Minutes(), float64(r.walksUnlimited)/r.wall.Minutes())
	}, "121 / 209", "", "")
	line("budget credit at the start → end of the window", func(r runResult) string {
		if r.schedule.cpuBudget == 0 {
			return "—"
		}
		return fmt.Sprintf("%.2f s → %.2f s", r.creditStart, r.creditEnd)
	}, "", "", "")
	line("walks deferred by the budget, per minute", func(r runResult) string {
		if r.schedule.cpuBudget == 0 {
			return "—"
		}
		return fmt.Sprintf("%.0f", r.deferred/r.wall.Minutes())
	}, "", "", "")
	line("oldest measurement at the end, limited / others", func(r runResult) string {
		return fmt.Sprintf("%.0f s / %.0f s", r.maxAgeLimited, r.maxAgeOther)
	}, "up to 60 s", "", "")
	line(fmt.Sprintf("write past a sizeLimit → published (target ≤ one %s interval)", defaultCycle), func(r runResult) string {
		if r.published == 0 {
			return "—"
		}
		return "**" + seconds(r.published.Seconds()) + "**"
	}, "", "", "")
	return w.String()
}

func sum(m map[string]float64) float64 {
	var s float64
	for _, v := range m {
		s += v
	}
	return s
}

func median(us []usage) usage {
	slices.SortFunc(us, func(a, b usage) int { return int(a.cpu - b.cpu) })
	return us[len(us)/2]
}

func seconds(s float64) string {
	if s < 1 {
		return fmt.Sprintf("%.1f ms", s*1000)
	}
	return fmt.Sprintf("%.2f s", s)
}
func count(n float64) string { return fmt.Sprintf("%.0f", n) }
func mib(n float64) string   { return fmt.Sprintf("%.1f MiB", n/(1<<20)) }
func kib(n float64) string   { return fmt.Sprintf("%.0f KiB", n/(1<<10)) }
