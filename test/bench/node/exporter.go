package node

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"github.com/emptydir-guard/emptydir-guard/exporter"
	"github.com/emptydir-guard/emptydir-guard/exporter/exportertest"
	"github.com/emptydir-guard/emptydir-guard/exporter/part"
	"github.com/emptydir-guard/emptydir-guard/exporter/source"
	"github.com/emptydir-guard/emptydir-guard/internal/metricfilter"
)

// fixedPods is the node's pod list; the exporter sees it through exportertest.Pods, synced.
type fixedPods []part.Pod

// volumes counts the volumes of the pods.
func (p fixedPods) volumes() int {
	n := 0
	for _, pv := range p {
		n += len(pv.Parts)
	}
	return n
}

// countingSource is the filesystem source, counting the walks of each class of part (layout.go),
// the CPU their threads were charged, and when each part's latest measurement was made.
type countingSource struct {
	source.Filesystem
	walks [numClasses]atomic.Int64
	cpu   [numClasses]atomic.Int64 // nanoseconds, as the budget charged them

	// signal is the run's change signal; nil without one.
	signal *benchSignal

	mu sync.Mutex
	// measured is when the latest completed measurement of each part ("uid/volume") started,
	// what emptydir_measurement_age_seconds counts from.
	measured map[string]time.Time
}

func (s *countingSource) MeasurePart(ctx context.Context, p part.Pod, v part.Part, meter part.Meter) (part.Measurement, error) {
	c := classOf(v)
	s.walks[c].Add(1)
	m, err := s.Filesystem.MeasurePart(ctx, p, v, meter)
	if meter != nil {
		s.cpu[c].Add(int64(meter.Spent()))
	}
	if err == nil && m.Unlocated == "" && !m.CutShort {
		s.mu.Lock()
		if s.measured == nil {
			s.measured = map[string]time.Time{}
		}
		s.measured[p.UID+"/"+v.Name] = m.MeasuredAt
		s.mu.Unlock()
	}
	return m, err
}

// counts is what the source has counted so far, by class.
func (s *countingSource) counts() (walks [numClasses]int64, cpu [numClasses]time.Duration) {
	for c := range numClasses {
		walks[c], cpu[c] = s.walks[c].Load(), time.Duration(s.cpu[c].Load())
	}
	return walks, cpu
}

// ages appends, by class, the age at now of every part of pods: since its latest
// measurement started, or since never (since is when the exporter started) when it has none.
func (s *countingSource) ages(pods fixedPods, now, since time.Time, out *[numClasses][]float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range pods {
		for _, v := range p.Parts {
			at, ok := s.measured[p.UID+"/"+v.Name]
			if !ok {
				at = since
			} else if s.signal != nil && s.signal.Vouches(v) {
				at = s.signal.freshAt(p.UID, at)
			}
			c := classOf(v)
			out[c] = append(out[c], now.Sub(at).Seconds())
		}
	}
}

// node is one exporter over the generated node, served as the command serves it.
type node struct {
	exp     *exporter.Exporter
	source  *countingSource
	reg     *prometheus.Registry
	metrics http.Handler
	// shipped serves /metrics as the command does (exporter.MetricsHandler with the default
	// metric filter); nil on a node built to read every family (newNode without asShipped).
	shipped http.Handler
	// started is when the exporter was built: the age of a part never measured counts from it.
	started time.Time
	// descs are the exporter's Descs by metric name, found once by desc.
	descs map[string]*prometheus.Desc
}

// schedule is how an exporter under test walks: the defaults, or the old behaviour.
type schedule struct {
	name              string
	unlimitedInterval time.Duration
	cpuBudget         float64
	// signal runs the exporter with a change signal (benchSignal), writers the share of pods
	// writing in each cycle; skip: parts vouched unchanged are skipped until the sweep instead
	// of walked last (exporter.Config.SkipUnchanged).
	signal, skip bool
	writers      float64
}

// shipped is the exporter's defaults (exporter.DefaultConfig, which the command's flags
// show): the runs differ from them in the slow cadence and the budget only.
var shipped = exporter.DefaultConfig()

// The shipped defaults, a lower budget, and what the exporter did before the budget: every
// volume every interval.
var (
	defaults      = schedule{name: "ours without the change signal (others every 1m, budget 5 %)", unlimitedInterval: shipped.UnlimitedInterval, cpuBudget: shipped.CPUBudget}
	lowerBudget   = schedule{name: "ours, budget 4 %", unlimitedInterval: shipped.UnlimitedInterval, cpuBudget: 0.04}
	everyInterval = schedule{name: "before: every volume every interval, no budget"}
	// The defaults with the change signal (parts vouched unchanged walked last, as shipped, then
	// skipped until the sweep), by the share of pods writing in each cycle. Skipping differs only
	// where some pods write nothing.
	signalRuns = []schedule{
		withSignal(0, false), withSignal(0.1, false), withSignal(0.5, false), withSignal(1, false),
		withSignal(0, true), withSignal(0.1, true),
	}
	defaultCycle  = shipped.Interval
	defaultScrape = 5 * time.Second // the shipped PodMonitor's and ServiceMonitor's exporterInterval
	// defaultSlowScrape is the shipped monitors' exporterSlowInterval: every series but the
	// trigger collector's.
	defaultSlowScrape = 30 * time.Second
)

// benchOwnCPU is all the CPU the benchmark's own work has taken in this process (measureOwn),
// which the exporter's budget must not be charged for (newNode).
var benchOwnCPU atomic.Int64

// sampledOptIn are the opt-in families a timed run reads itself (sample), published beside
// the shipped defaults' families: one series per pod with a limit.
var sampledOptIn = []string{"emptydir_pod_ephemeral_storage_measurement_age_seconds"}

func withSignal(writers float64, skip bool) schedule {
	s := defaults
	s.name = fmt.Sprintf("ours, change signal, %.0f %% of pods writing", 100*writers)
	if skip {
		s.name = fmt.Sprintf("ours, change signal skipping unchanged parts, %.0f %% of pods writing", 100*writers)
	}
	s.signal, s.skip, s.writers = true, skip, writers
	return s
}

// newNode builds an exporter of the node's pods walking as s says. asShipped builds it as the
// command does at the chart's defaults: only the families the default metric filter exposes
// (and sampledOptIn), scraped through its MetricsHandler (scrapeAsShipped); without, every
// family, for the checks that read the opt-in ones.
func newNode(t tree, pods fixedPods, s schedule, asShipped bool) (*node, error) {
	src := &countingSource{Filesystem: t.source()}
	cfg := exporter.DefaultConfig()
	cfg.NodeName, cfg.Source, cfg.Pods = "bench-node", src, exportertest.NewPods(pods...)
	var filter *metricfilter.Filter
	if asShipped {
		var err error
		if filter, err = (&metricfilter.Filter{}).WithOptIn(exporter.OptInFamilies, sampledOptIn); err != nil {
			return nil, err
		}
		cfg.Publishes = filter.Exposes
	}
	cfg.UnlimitedInterval, cfg.CPUBudget = s.unlimitedInterval, s.cpuBudget
	// The whole process is charged, as in the command, less the benchmark's own work.
	cfg.ProcessCPU = func() time.Duration { return processCPU() - time.Duration(benchOwnCPU.Load()) }
	if s.signal {
		targets, err := overLimitTargets(t, pods)
		if err != nil {
			return nil, err
		}
		src.signal = newBenchSignal(s.writers, targets)
		cfg.ChangeSignal, cfg.SkipUnchanged = src.signal, s.skip
	}
	exp, err := exporter.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("exporter: %w", err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(exp, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	n := &node{exp: exp, source: src, reg: reg, metrics: exp.ScrapeHandler(promhttp.HandlerFor(reg, promhttp.HandlerOpts{})),
		started: time.Now()}
	if asShipped {
		if n.shipped, err = exp.MetricsHandler(exporter.MetricsHandlerOpts{
			Others: map[string][]prometheus.Collector{
				"go": {collectors.NewGoCollector()}, "process": {collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})},
			},
			Filter: filter.Gatherer,
		}); err != nil {
			return nil, fmt.Errorf("metrics handler: %w", err)
		}
	}
	return n, nil
}

// scrapeAsShipped is one scrape of the shipped monitors: the trigger collector's series, or
// (slow) every other's, through the command's handler and filter, gzip-compressed.
func (n *node) scrapeAsShipped(slow bool) error {
	target := "/metrics?collect[]=" + exporter.CollectorTrigger
	if slow {
		target = "/metrics?exclude[]=" + exporter.CollectorTrigger
	}
	_, err := serve(n.shipped, target)
	return err
}

// scrape renders /metrics as Prometheus gets it (gzip-compressed, from one scraper) and
// returns its size.
func (n *node) scrape() (int, error) { return serve(n.metrics, "/metrics") }

// serve gets target from h as Prometheus does (gzip-compressed) and returns the body's size.
func serve(h http.Handler, target string) (int, error) {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, target, nil)
	req.Header.Set("Accept-Encoding", "gzip")
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		return 0, fmt.Errorf("%s answered %d: %s", target, rec.Code, rec.Body)
	}
	return rec.Body.Len(), nil
}

// values gathers one gauge's series, keyed by the values of the labels keys joined with "/".
func (n *node) values(name string, keys ...string) (map[string]float64, error) {
	mfs, err := n.reg.Gather()
	if err != nil {
		return nil, fmt.Errorf("gathering: %w", err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var k []string
			for _, l := range keys {
				k = append(k, label(m, l))
			}
			out[strings.Join(k, "/")] = m.GetGauge().GetValue()
		}
	}
	return out, nil
}

// volumeValues gathers one per-volume metric by volume, keyed "pod/volume".
func (n *node) volumeValues(name string) (map[string]float64, error) {
	return n.values(name, "pod", "volume")
}

// desc is the exporter's Desc of the metric name.
func (n *node) desc(name string) *prometheus.Desc {
	if n.descs == nil {
		n.descs = map[string]*prometheus.Desc{}
		descs := make(chan *prometheus.Desc, 256)
		go func() { n.exp.Describe(descs); close(descs) }()
		for d := range descs {
			// fqName: "name", the only quoted string before the help.
			if _, rest, ok := strings.Cut(d.String(), `fqName: "`); ok {
				if name, _, ok := strings.Cut(rest, `"`); ok {
					n.descs[name] = d
				}
			}
		}
	}
	return n.descs[name]
}

// collect runs the exporter's Collect on the calling goroutine (series is a bound on the
// metrics it emits) and gives the series of the metric name, written out: what the
// benchmark's own polls and samples read, without the registry (and its Go and process
// collectors) a scrape goes through.
func (n *node) collect(name string, series int) ([]*dto.Metric, error) {
	want := n.desc(name)
	if want == nil {
		return nil, fmt.Errorf("the exporter describes no %s", name)
	}
	// On this goroutine, so that its thread counts the CPU: series must hold every metric.
	ch := make(chan prometheus.Metric, series)
	n.exp.Collect(ch)
	close(ch)
	var out []*dto.Metric
	var err error
	for m := range ch {
		if m.Desc() != want || err != nil {
			continue
		}
		var d dto.Metric
		if err = m.Write(&d); err == nil {
			out = append(out, &d)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}

// usedBytesAll is every volume's emptydir_used_bytes, keyed "pod/volume", straight from the
// exporter's Collect on the calling goroutine: the benchmark's own polls, whose CPU the caller
// counts on its thread.
func (n *node) usedBytesAll(series int) (map[string]float64, error) {
	ms, err := n.collect("emptydir_used_bytes", series)
	if err != nil {
		return nil, err
	}
	out := make(map[string]float64, len(ms))
	for _, d := range ms {
		out[label(d, "pod")+"/"+label(d, "volume")] = d.GetGauge().GetValue()
	}
	return out, nil
}

// gauge gathers the value of a gauge without labels but node; 0 when absent.
func (n *node) gauge(name string) (float64, error) {
	mfs, err := n.reg.Gather()
	if err != nil {
		return 0, fmt.Errorf("gathering: %w", err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) > 0 {
			return mf.GetMetric()[0].GetGauge().GetValue(), nil
		}
	}
	return 0, nil
}

// counter gathers the value of a counter with the given label value (any when empty).
func (n *node) counter(name, labelName, value string) (float64, error) {
	mfs, err := n.reg.Gather()
	if err != nil {
		return 0, fmt.Errorf("gathering: %w", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if labelName == "" || label(m, labelName) == value {
				return m.GetCounter().GetValue(), nil
			}
		}
	}
	return 0, nil
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// overLimitPods are the pods whose scratch volumes the benchmark writes past their sizeLimit
// while ours runs, one after the other at different phases of the cycle: far from their
// limits until then, so that nearest-to-limit first walks them late.
var overLimitPods = []string{"app-077", "app-023", "app-041", "app-098"}

// overLimitTarget is a volume writeOverLimit fills, and the file it writes there.
type overLimitTarget struct {
	pod, uid string
	volume   part.Part
	path     string
}

// key is the target's "pod/volume", as the benchmark keys per-volume series.
func (o overLimitTarget) key() string { return o.pod + "/" + o.volume.Name }

// overLimitTargets are the scratch volumes of overLimitPods and the files written there.
func overLimitTargets(t tree, pods fixedPods) ([]overLimitTarget, error) {
	var out []overLimitTarget
	for _, name := range overLimitPods {
		pv, ok, _ := exportertest.NewPods(pods...).Get(namespace, name)
		if !ok {
			return nil, fmt.Errorf("pod %s not in the layout", name)
		}
		i := slices.IndexFunc(pv.Parts, func(v part.Part) bool { return v.Name == limitedVolume })
		if i < 0 {
			return nil, fmt.Errorf("pod %s has no volume %s", name, limitedVolume)
		}
		v := pv.Parts[i]
		out = append(out, overLimitTarget{pod: name, uid: pv.UID, volume: v,
			path: filepath.Join(part.EmptyDirPath(t.kubeletRoot, pv.UID, v.Name), "over-limit")})
	}
	return out, nil
}
