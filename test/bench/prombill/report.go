package prombill

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// runFigures is what one Prometheus run measured, over its window.
type runFigures struct {
	nodes int
	// headSeries is prometheus_tsdb_head_series at the window's end; selfSeries the series
	// of Prometheus' own scrape, taken out of the nodes' share.
	headSeries, selfSeries float64
	// exporterSeries is the series one node's scrapes give, every job added up.
	exporterSeries float64
	// appendedPerSecond is every sample appended (scrapes and rules); selfPerSecond
	// Prometheus' own scrape's part of it.
	appendedPerSecond, selfPerSecond float64
	rssBytes                         float64 // process_resident_memory_bytes, mean over the window
	cpuCores                         float64 // Prometheus' CPU over the window
	scrapeSeconds                    float64 // scrape_duration_seconds of one node, every job added up
	groups                           []groupFigure
	// restarts is how many pods the churn phase restarted (0: none) and seriesCreated the
	// series they created, the steady creation rate taken out.
	restarts      int
	seriesCreated float64
}

// groupFigure is one rule group's evaluation time: the median of the evaluations seen.
type groupFigure struct {
	name        string
	interval    time.Duration
	evalSeconds float64
}

// exposition is one node's scrape, every job of the profile added up: its size
// uncompressed and gzip-compressed, and how long the handler takes to render it (median
// over the nodes).
type exposition struct {
	rawBytes, gzipBytes, renderSeconds float64
}

// profileResult is what was measured of one profile: at N nodes and at N/2.
type profileResult struct {
	name       string
	full, half runFigures
	exposition exposition
}

// bill is a profile's cost per node, derived from its measurements.
type bill struct {
	name                                    string
	exporterSeries, headSeries, samplesRate float64
	exposition                              exposition
	scrapeSeconds                           float64
	rss, cpu                                float64 // slopes per node (perNode)
	groups                                  []groupBill
	evalAtN                                 float64 // every group's evaluation at N, added up
	// seriesPerRestart is the series a pod restart creates; NaN when no pod restarted.
	seriesPerRestart float64
}

// groupBill is one rule group's evaluation time per node.
type groupBill struct {
	name     string
	interval time.Duration
	perNode  float64
}

// bills derives each profile's per-node cost from its own runs.
func bills(results []profileResult) []bill {
	var out []bill
	for _, r := range results {
		f := r.full
		b := bill{name: r.name, exporterSeries: f.exporterSeries,
			headSeries:  (f.headSeries - f.selfSeries) / float64(f.nodes),
			samplesRate: (f.appendedPerSecond - f.selfPerSecond) / float64(f.nodes),
			exposition:  r.exposition, scrapeSeconds: f.scrapeSeconds, seriesPerRestart: math.NaN()}
		if f.restarts > 0 {
			b.seriesPerRestart = f.seriesCreated / float64(f.restarts)
		}
		b.rss = perNode(r, func(f runFigures) (float64, bool) { return f.rssBytes, true })
		b.cpu = perNode(r, func(f runFigures) (float64, bool) { return f.cpuCores, true })
		for _, g := range f.groups {
			b.evalAtN += g.evalSeconds
			slope := perNode(r, func(f runFigures) (float64, bool) { return groupEval(f, g.name) })
			b.groups = append(b.groups, groupBill{name: g.name, interval: g.interval, perNode: slope})
		}
		out = append(out, b)
	}
	return out
}

// perNode is a figure's slope between r's runs at N/2 and N nodes, Prometheus' own base so
// left out; NaN when a run lacks the figure or the runs do not differ in nodes.
func perNode(r profileResult, at func(runFigures) (float64, bool)) float64 {
	full, okFull := at(r.full)
	half, okHalf := at(r.half)
	if !okFull || !okHalf || r.half.nodes >= r.full.nodes {
		return math.NaN()
	}
	return (full - half) / float64(r.full.nodes-r.half.nodes)
}

// groupEval is the named group's evaluation time in f.
func groupEval(f runFigures, name string) (float64, bool) {
	for _, g := range f.groups {
		if g.name == name {
			return g.evalSeconds, true
		}
	}
	return 0, false
}

// restartsPerPodPerDay is the churn rate the report states: every pod restarting once a day.
const restartsPerPodPerDay = 1

// churnPerHour is the series a node creates in an hour at restartsPerPodPerDay.
func (b bill) churnPerHour() float64 {
	return b.seriesPerRestart * podsPerNode * restartsPerPodPerDay / 24
}

// fleetSize is what the report extrapolates to.
const fleetSize = 1000

// reportRow is one line of the table: a value per profile.
type reportRow struct {
	label  string
	value  func(bill) float64
	format func(float64) string
}

// runInfo is what the line under the table says about the run.
type runInfo struct {
	cpus              int
	prometheusVersion string
	nodes, halfNodes  int // the two runs' nodes, the slopes' ends
	warmUp, window    time.Duration
	churnRestarts     int // pods restarted per node in the churn phase
	churnPhase        time.Duration
}

// renderReport is the markdown of the section: the table, one column per profile, with each
// profile's ratio to the first, and the run's line.
func renderReport(bs []bill, info runInfo) string {
	if len(bs) == 0 {
		return "No profile was measured.\n"
	}
	rows := []reportRow{
		{"Series per node, as scraped (every job)", func(b bill) float64 { return b.exporterSeries }, fmtCount},
		{"Head series per node (recording rules' output included)", func(b bill) float64 { return b.headSeries }, fmtCount},
		{"Samples appended per second per node", func(b bill) float64 { return b.samplesRate }, fmtRate},
		{"Exposition per scrape, uncompressed", func(b bill) float64 { return b.exposition.rawBytes }, fmtBytes},
		{"Exposition per scrape, gzip (as Prometheus fetches it)", func(b bill) float64 { return b.exposition.gzipBytes }, fmtBytes},
		{"Render time per scrape, in-process (median over nodes)", func(b bill) float64 { return b.exposition.renderSeconds }, fmtSeconds},
		{"Scrape duration Prometheus sees (mean)", func(b bill) float64 { return b.scrapeSeconds }, fmtSeconds},
		{"Prometheus RSS per node", func(b bill) float64 { return b.rss }, growth(fmtBytes)},
		{"Prometheus CPU per node", func(b bill) float64 { return b.cpu }, growth(fmtCores)},
		{"Series created per pod restart", func(b bill) float64 { return b.seriesPerRestart }, fmtCount},
		{fmt.Sprintf("Series churn per node per hour, every pod restarting %d× a day", restartsPerPodPerDay), bill.churnPerHour, fmtCount},
		{fmt.Sprintf("Rule evaluation at %d nodes, every group added up (measured)", info.nodes), func(b bill) float64 { return b.evalAtN }, fmtSeconds},
		{"**Head series, 1,000 nodes**", func(b bill) float64 { return b.headSeries * fleetSize }, fmtCount},
		{"**Samples appended per second, 1,000 nodes**", func(b bill) float64 { return b.samplesRate * fleetSize }, fmtRate},
		{"**Prometheus RSS, 1,000 nodes**", func(b bill) float64 { return b.rss * fleetSize }, growth(fmtBytes)},
		{"**Prometheus CPU, 1,000 nodes**", func(b bill) float64 { return b.cpu * fleetSize }, growth(fmtCores)},
		{"Series churn per hour, 1,000 nodes", func(b bill) float64 { return b.churnPerHour() * fleetSize }, fmtCount},
	}
	for _, g := range ruleGroupsOf(bs) {
		name := g.name
		rows = append(rows, reportRow{fmt.Sprintf("Rule group `%s` (every %s), evaluation at 1,000 nodes", name, g.intervals),
			func(b bill) float64 {
				for _, bg := range b.groups {
					if bg.name == name {
						return bg.perNode * fleetSize
					}
				}
				return math.NaN() // not in this profile's rules
			}, growth(fmtSeconds)})
	}

	var sb strings.Builder
	sb.WriteString("| Per node, and extrapolated |")
	for _, b := range bs {
		fmt.Fprintf(&sb, " %s |", b.name)
	}
	sb.WriteString("\n|---|" + strings.Repeat("---:|", len(bs)) + "\n")
	for _, row := range rows {
		fmt.Fprintf(&sb, "| %s |", row.label)
		ref := row.value(bs[0])
		for i, b := range bs {
			fmt.Fprintf(&sb, " %s |", cell(row.value(b), ref, i > 0, row.format))
		}
		sb.WriteString("\n")
	}
	sb.WriteString("\n" + runLine(info))
	return sb.String()
}

// reportGroup is a rule group of the table: its name and its intervals, " / "-joined when
// the profiles' rules differ in them.
type reportGroup struct {
	name, intervals string
}

// ruleGroupsOf is every rule group a profile evaluated, in the order first seen.
func ruleGroupsOf(bs []bill) []reportGroup {
	var names []string
	intervals := map[string][]string{}
	for _, b := range bs {
		for _, g := range b.groups {
			if _, seen := intervals[g.name]; !seen {
				names = append(names, g.name)
			}
			if iv := g.interval.String(); !slices.Contains(intervals[g.name], iv) {
				intervals[g.name] = append(intervals[g.name], iv)
			}
		}
	}
	out := make([]reportGroup, 0, len(names))
	for _, name := range names {
		out = append(out, reportGroup{name: name, intervals: strings.Join(intervals[name], " / ")})
	}
	return out
}

// cell formats v, with its ratio to ref for a profile other than the first.
func cell(v, ref float64, withRatio bool, format func(float64) string) string {
	if math.IsNaN(v) {
		return "–"
	}
	s := format(v)
	if withRatio && v >= 0 && ref > 0 {
		s += fmt.Sprintf(" (× %.2f)", v/ref)
	}
	return s
}

func runLine(info runInfo) string {
	return fmt.Sprintf("Measured on %d CPUs with %s: %d simulated nodes (%d pods each), warm-up %v, window %v; "+
		"RSS, CPU and rule evaluation fitted over %d and %d nodes; churn: %d pods per node restarted over %v.\n",
		info.cpus, info.prometheusVersion, info.nodes, podsPerNode, info.warmUp, info.window,
		info.halfNodes, info.nodes, info.churnRestarts, info.churnPhase)
}

// noGrowth is what a fitted slope below 0 shows: the figure did not grow with the nodes
// beyond the run's noise (a small rule group's wall time on a busy machine).
const noGrowth = "no growth measured"

// growth is format for a fitted slope, which noise can make negative.
func growth(format func(float64) string) func(float64) string {
	return func(v float64) string {
		if v < 0 {
			return noGrowth
		}
		return format(v)
	}
}

func fmtCount(v float64) string {
	s := fmt.Sprintf("%.0f", math.Abs(v))
	if math.Abs(v) < 10 && v != math.Trunc(v) {
		s = fmt.Sprintf("%.1f", math.Abs(v))
	}
	intPart, frac, _ := strings.Cut(s, ".")
	var sb strings.Builder
	if v < 0 {
		sb.WriteString("−")
	}
	for i, r := range intPart {
		if i > 0 && (len(intPart)-i)%3 == 0 {
			sb.WriteString(",")
		}
		sb.WriteRune(r)
	}
	if frac != "" {
		sb.WriteString("." + frac)
	}
	return sb.String()
}

func fmtRate(v float64) string { return fmtCount(v) + "/s" }

func fmtBytes(v float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for math.Abs(v) >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	if i == 0 {
		return fmtCount(v) + " B"
	}
	return fmt.Sprintf("%.1f %s", v, units[i])
}

func fmtSeconds(v float64) string {
	switch {
	case math.Abs(v) >= 1:
		return fmt.Sprintf("%.2f s", v)
	case math.Abs(v) >= 1e-3:
		return fmt.Sprintf("%.1f ms", v*1e3)
	default:
		return fmt.Sprintf("%.0f µs", v*1e6)
	}
}

func fmtCores(v float64) string {
	if math.Abs(v) >= 1 {
		return fmt.Sprintf("%.2f cores", v)
	}
	return fmt.Sprintf("%.2f %% of a core", v*100)
}

// median is the median of vs; NaN when empty.
func median(vs []float64) float64 {
	if len(vs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// familyCount is how many series of one metric name an exposition holds.
type familyCount struct {
	name   string
	series int
}

// seriesByFamily counts the series of a text exposition by metric name, most first.
func seriesByFamily(text string) []familyCount {
	counts := map[string]int{}
	for line := range strings.Lines(text) {
		if line = strings.TrimSpace(line); line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, _, _ := strings.Cut(line, " ")
		name, _, _ = strings.Cut(name, "{")
		counts[name]++
	}
	var out []familyCount
	for name, n := range counts {
		out = append(out, familyCount{name, n})
	}
	slices.SortFunc(out, func(a, b familyCount) int {
		if a.series != b.series {
			return b.series - a.series
		}
		return strings.Compare(a.name, b.name)
	})
	return out
}
