package node

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// report is the section node of docs/performance.md: what the node holds and what ours
// costs to measure it, one pass against the peers, then each schedule running.
func report(st layoutStats, pass passResult, runs []runResult, pr params) string {
	var w strings.Builder
	if pr.scale != 1 {
		fmt.Fprintf(&w, "**A small layout (files and bytes ÷ %d): a check of the benchmark, not figures of the node.**\n\n", pr.scale)
	}
	fmt.Fprintf(&w, "%d pods: %s files in %d emptyDirs and %s in %d containers' writable layers, %s in all, besides %d log files and %d etc-hosts; %d pods with an ephemeral-storage limit; warm page cache; %d cores, load average %s at the end; Go %s.\n\n",
		st.pods, thousands(st.emptyDirFiles), st.parts[classSizeLimit]+st.parts[classPodLimit]+st.parts[classUnguarded],
		thousands(st.layerFiles), st.pods, thousands(st.emptyDirFiles+st.layerFiles), st.logFiles, st.pods, st.limitedPods,
		numCPU(), loadAverage(), goVersion())

	fmt.Fprintf(&w, "What ours measures, and what walking it as due costs (its walks' CPU in one pass, as the budget charges it; the median pass below):\n\n")
	fmt.Fprintf(&w, "| part | measured | files | due | CPU per pass | share of a core, walked as due |\n| --- | --- | --- | --- | --- | --- |\n")
	var guardedShare, allShare float64
	for c := range numClasses {
		period := defaultCycle
		if !c.guarded() {
			period = defaults.unlimitedInterval
		}
		cpu, share := "not charged", "—"
		if d := pass.oursCPU[c]; d > 0 {
			s := d.Seconds() / period.Seconds()
			cpu, share = seconds(d.Seconds()), fmt.Sprintf("%.1f %%", 100*s)
			allShare += s
			if c.guarded() {
				guardedShare += s
			}
		}
		fmt.Fprintf(&w, "| %s | %d | %s | every %s | %s | %s |\n", c, st.parts[c], thousands(st.files[c]), dur(period), cpu, share)
	}
	fmt.Fprintf(&w, "| writable layers of pods without a limit | not measured | %s | — | — | — |\n", thousands(st.layerFiles-st.files[classLayer]))
	fmt.Fprintf(&w, "| **all** | %d | %s | | %s | **%.1f %%**, of which the guarded parts %.1f %% |\n\n",
		sumInts(st.parts[:]), thousands(sumInts(st.files[:])), seconds(sumDurations(pass.oursCPU[:]).Seconds()), 100*allShare, 100*guardedShare)

	fmt.Fprintf(&w, "One pass over every part (median of 3), against the kubelet's `fs.DiskUsage` over the same directories (the emptyDirs, as the kubelet walks them, and the writable layers ours measures):\n\n")
	fmt.Fprintf(&w, "| per pass | ours (one collection cycle) | `fs.DiskUsage` over the same | ours/peer |\n| --- | --- | --- | --- |\n")
	peer := pass.peer()
	row := func(name string, o, k float64, unit func(float64) string) {
		fmt.Fprintf(&w, "| %s | %s | %s | %.2f |\n", name, unit(o), unit(k), o/k)
	}
	row("wall", pass.ours.wall.Seconds(), peer.wall.Seconds(), seconds)
	row("CPU", pass.ours.cpu.Seconds(), peer.cpu.Seconds(), seconds)
	row("allocations", float64(pass.ours.mallocs), float64(peer.mallocs), count)
	row("allocated bytes", float64(pass.ours.allocBytes), float64(peer.allocBytes), mib)
	row("peak RSS of the process", float64(pass.ours.peakRSSByte), float64(peer.peakRSSByte), mib)
	fmt.Fprintf(&w, "\nOf ours' CPU per pass, the walks' threads counted %s (%.0f %%: what the CPU budget charges); the rest is the runtime (garbage collection on other threads), the cycle's bookkeeping, the log files' and etc-hosts' stats (not metered) and the probe's own `runtime.GC`. The peer's pass: %s for the emptyDirs, %s for the writable layers; the other pods' layers, which containerd walks too, %s.\n",
		seconds(pass.ours.walkCPU.Seconds()), 100*pass.ours.walkCPU.Seconds()/pass.ours.cpu.Seconds(),
		seconds(pass.kubelet.cpu.Seconds()), seconds(pass.layers.cpu.Seconds()), seconds(pass.otherLayers.cpu.Seconds()))
	fmt.Fprintf(&w, "\n`/metrics` after the pass (%d emptyDirs and %d pods' totals, with the Go and process collectors): rendered in %s (median of 20), %s.\n\n",
		pass.series, st.limitedPods, seconds(pass.render.Seconds()), kib(float64(pass.renderBytes)))

	ours, old := runs[0], runs[len(runs)-1]
	fmt.Fprintf(&w, "Each exporter running for %s after %s of warm-up, interval %s aligned to the shipped monitors' gzip-compressed scrapes (the trigger collector every %s, the rest every %s, through the default metric filter, with one opt-in family the benchmark samples: %s); the process's CPU leaves out the benchmark's own over-limit write, its polls for it and its freshness samples (%s in the first column's window, counted on their threads). The peers' share: the kubelet's pass over the emptyDirs once per its %s `--volume-stats-agg-period` (%.1f %%) and, as containerd's estimate, the same walk over every writable layer once per its %s `stats_collect_period` (%.1f %%). Ratios: ours without the change signal (the first column) against each peer.\n\n",
		dur(pr.steady), dur(pr.warmUp), dur(defaultCycle), dur(defaultScrape), dur(defaultSlowScrape), "`"+strings.Join(sampledOptIn, "`, `")+"`", seconds(ours.ownCPU.Seconds()),
		dur(kubeletPeriod), 100*pass.kubeletShare(), dur(containerdPeriod), 100*pass.containerdShare())
	header := func(first, peerName string, ratios bool) {
		fmt.Fprintf(&w, "| %s |", first)
		for _, r := range runs {
			fmt.Fprintf(&w, " %s |", r.schedule.name)
		}
		cols := len(runs) + 2
		fmt.Fprintf(&w, " %s |", peerName)
		if ratios {
			fmt.Fprintf(&w, " ours/before | ours/peers |")
			cols += 2
		}
		fmt.Fprintf(&w, "\n|%s\n", strings.Repeat(" --- |", cols))
	}
	line := func(name string, cell func(runResult) string, rest ...string) {
		fmt.Fprintf(&w, "| %s |", name)
		for _, r := range runs {
			fmt.Fprintf(&w, " %s |", cell(r))
		}
		fmt.Fprintf(&w, " %s |\n", strings.Join(rest, " | "))
	}
	header("running", "kubelet + containerd", true)
	ratio := func(a, b float64) string { return fmt.Sprintf("%.2f", a/b) }
	perCycle := func(v float64, r runResult) float64 { return v / r.cycles }
	pct := func(v float64) string { return fmt.Sprintf("%.1f %%", 100*v) }
	line("CPU of the process, share of one core (target ≤ 5 %)", func(r runResult) string { return pct(r.share) },
		pct(pass.peerShare()), ratio(ours.share, old.share), ratio(ours.share, pass.peerShare()))
	line("of which the walks, as the budget charges them", func(r runResult) string { return pct(r.walkShare) },
		"", ratio(ours.walkShare, old.walkShare), "")
	line("the walks less the credit drawn from before the window", func(r runResult) string { return pct(r.walkNetShare) }, "", "", "")
	line("the process less that credit (steady state)", func(r runResult) string { return pct(r.share - (r.walkShare - r.walkNetShare)) }, "", "", "")
	line(fmt.Sprintf("CPU per %s cycle", dur(defaultCycle)), func(r runResult) string { return seconds(perCycle(r.cpu.Seconds(), r)) },
		"", ratio(perCycle(ours.cpu.Seconds(), ours), perCycle(old.cpu.Seconds(), old)), "")
	allocs := func(r runResult) float64 { return perCycle(float64(r.mallocs)-float64(r.ownAllocs), r) }
	line("allocations per cycle (the benchmark's own left out)", func(r runResult) string { return count(allocs(r)) },
		"", ratio(allocs(ours), allocs(old)), "")
	line("peak RSS of the process", func(r runResult) string { return mib(float64(r.peakRSSByte)) },
		"", ratio(float64(ours.peakRSSByte), float64(old.peakRSSByte)), "")
	line("budget credit at the start → end of the window", func(r runResult) string {
		if r.schedule.cpuBudget == 0 {
			return "—"
		}
		return fmt.Sprintf("%.2f s → %.2f s", r.creditStart, r.creditEnd)
	}, "", "", "")
	line("walks deferred per minute: CPU budget / no walk slot", func(r runResult) string {
		return fmt.Sprintf("%.0f / %.0f", r.deferredBudget/r.wall.Minutes(), r.deferredSlot/r.wall.Minutes())
	}, "", "", "")
	line(fmt.Sprintf("%d writes past a sizeLimit, %s apart → published, median / max (target ≤ one %s interval)", len(overLimitPods), dur(writeEvery), dur(defaultCycle)),
		func(r runResult) string {
			if len(r.published) == 0 {
				return "—"
			}
			return "**" + publishedTimes(r) + "**"
		}, "", "", "")

	fmt.Fprintf(&w, "\nFreshness: the age of each part's latest measurement (since its walk started, as `emptydir_measurement_age_seconds` counts it) at every %s over the window, all parts of a kind together, p50 / p90 / max; for the pod totals the published `emptydir_pod_ephemeral_storage_measurement_age_seconds` (the oldest part behind each total) of the %d pods with a limit (%d samples in the first column's window):\n\n",
		dur(defaultScrape), st.limitedPods, ours.samples)
	header("age", "kubelet / containerd", false)
	age := func(xs []float64) string {
		return fmt.Sprintf("%.0f / %.0f / %.0f s", percentile(xs, 0.5), percentile(xs, 0.9), percentile(xs, 1))
	}
	peerAge := [numClasses]string{"up to 60 s", "up to 60 s", "up to 60 s", "up to 10 s", "", ""}
	for c := range numClasses {
		line(fmt.Sprintf("%s (%d)", c, st.parts[c]), func(r runResult) string { return age(r.ages[c]) }, peerAge[c])
	}
	line("pod totals", func(r runResult) string { return age(r.podAges) }, "up to 60 s")

	fmt.Fprintf(&w, "\nWalks per minute started in the window, of those due, and the CPU they were charged (share of one core):\n\n")
	header("walks", "kubelet / containerd", false)
	var peerWalks [numClasses]string
	for _, c := range []class{classSizeLimit, classPodLimit, classUnguarded} {
		peerWalks[c] = fmt.Sprint(st.parts[c]) // once a minute
	}
	peerWalks[classLayer] = fmt.Sprintf("%.0f (every layer)", float64(st.pods)*time.Minute.Seconds()/containerdPeriod.Seconds())
	for c := range numClasses {
		line(c.String(), func(r runResult) string {
			period := defaultCycle
			if !c.guarded() && r.schedule.unlimitedInterval > 0 {
				period = r.schedule.unlimitedInterval
			}
			// A guarded part is due every cycle that ran; the others once per period.
			due := float64(st.parts[c]) * r.cyclesRun / r.wall.Minutes()
			if period != defaultCycle {
				due = float64(st.parts[c]) * time.Minute.Seconds() / period.Seconds()
			}
			return fmt.Sprintf("%.0f of %.0f, %s", float64(r.walks[c])/r.wall.Minutes(), due, pct(r.walkCPU[c].Seconds()/r.wall.Seconds()))
		}, peerWalks[c])
	}
	signalReport(&w, st, runs)
	return w.String()
}

// signalReport is the change signal's table: the runs with a signal, in each mode, by the share
// of pods writing in each cycle, against the same schedule without one (the first run).
func signalReport(w *strings.Builder, st layoutStats, runs []runResult) {
	ours := runs[0]
	var sig []runResult
	for _, r := range runs {
		if r.schedule.signal {
			sig = append(sig, r)
		}
	}
	if len(sig) == 0 {
		return
	}
	fmt.Fprintf(w, "\nWith the change signal (`--collection.change-signal`, on by default): the shipped schedule, each part whose pod wrote nothing since its last walk began walked behind every other due walk, on what the budget has left (the default), or skipped (`--collection.change-signal.skip-unchanged`), until that walk is %s old (the sweep); a share of the pods writes in each %s cycle, chosen afresh each cycle (a stand-in of the pods' cgroups, each mark read paying a real `memory.stat` read; the pod of the over-limit write changes its mark when the file grows, as its cgroup's counters would). Age: since the part's walk began, or, when its pod's mark vouched it unchanged since then, since that mark was read (`emptydir_measurement_unchanged_timestamp_seconds`). Ratios against the same schedule without the signal (the first column above):\n\n",
		dur(defaults.unlimitedInterval), dur(defaultCycle))
	fmt.Fprintf(w, "| unchanged parts | pods writing per cycle | CPU, share of one core | against no signal | walks per minute | sizeLimit emptyDirs age p90 / max | pod-limit emptyDirs age p90 / max | writable layers age p90 / max | writes past a sizeLimit → published, median / max |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	pct := func(v float64) string { return fmt.Sprintf("%.1f %%", 100*v) }
	age := func(xs []float64) string { return fmt.Sprintf("%.0f / %.0f s", percentile(xs, 0.9), percentile(xs, 1)) }
	walks := func(r runResult) float64 {
		var n int64
		for c := range numClasses {
			n += r.walks[c]
		}
		return float64(n) / r.wall.Minutes()
	}
	published := publishedTimes
	mode := func(r runResult) string {
		if r.schedule.skip {
			return "skipped"
		}
		return "walked last (default)"
	}
	fmt.Fprintf(w, "| (no signal) | | %s | 1.00 | %.0f | %s | %s | %s | %s |\n", pct(ours.share), walks(ours),
		age(ours.ages[classSizeLimit]), age(ours.ages[classPodLimit]), age(ours.ages[classLayer]), published(ours))
	for _, r := range sig {
		fmt.Fprintf(w, "| %s | %.0f %% | %s | %.2f | %.0f | %s | %s | %s | %s |\n", mode(r), 100*r.schedule.writers, pct(r.share), r.share/ours.share, walks(r),
			age(r.ages[classSizeLimit]), age(r.ages[classPodLimit]), age(r.ages[classLayer]), published(r))
	}
	// The cost against the share writing, walked last: a line through the 0 % and 100 % runs.
	var first, last *runResult
	for i := range sig {
		if r := &sig[i]; !r.schedule.skip {
			if first == nil || r.schedule.writers < first.schedule.writers {
				first = r
			}
			if last == nil || r.schedule.writers > last.schedule.writers {
				last = r
			}
		}
	}
	if first != nil && last.schedule.writers > first.schedule.writers {
		slope := (last.share - first.share) / (last.schedule.writers - first.schedule.writers)
		growth := fmt.Sprintf("grows with the share of pods writing by about %s of a core per 10 %% of the %d pods", pct(slope/10), st.pods)
		if math.Abs(slope/10) < 0.0005 {
			growth = "does not grow measurably with the share of pods writing"
		}
		fmt.Fprintf(w, "\nWalked last, the cost %s (the %.0f %% and %.0f %% runs), from %s with none writing: the writing pods' parts go first every cycle, the others take what the budget has left and at least one walk per sweep. Skipped, the others take one walk per sweep only, which costs less where the budget would have covered more.\n",
			growth, 100*first.schedule.writers, 100*last.schedule.writers, pct(first.share))
	}
}

func sumInts(xs []int) int {
	s := 0
	for _, x := range xs {
		s += x
	}
	return s
}

func sumDurations(xs []time.Duration) time.Duration {
	var s time.Duration
	for _, x := range xs {
		s += x
	}
	return s
}

// dur writes d as Go does, but whole minutes as "1m".
func dur(d time.Duration) string {
	if d > 0 && d%time.Minute == 0 {
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return d.String()
}

// thousands writes n with thousands separated by commas.
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
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

// publishedTimes is the median and the longest time of r's over-limit writes to publish, and
// how many were not published within publishBound.
func publishedTimes(r runResult) string {
	late := 0
	longest := time.Duration(0)
	for _, d := range r.published {
		if d < 0 {
			late++
		}
		longest = max(longest, d)
	}
	median := r.publishedMedian()
	switch {
	case late == len(r.published):
		return fmt.Sprintf("none within %s", dur(publishBound))
	case late > 0 && median == time.Duration(math.MaxInt64):
		return fmt.Sprintf("%d of %d not within %s", late, len(r.published), dur(publishBound))
	case late > 0:
		return fmt.Sprintf("%s / %d of %d not within %s", seconds(median.Seconds()), late, len(r.published), dur(publishBound))
	}
	return fmt.Sprintf("%s / %s", seconds(median.Seconds()), seconds(longest.Seconds()))
}
