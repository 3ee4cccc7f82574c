package exporter

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/emptydir-guard/emptydir-guard/exporter/part"
)

// What the tests of package exporter_test reach inside an Exporter, where its fakes
// (exportertest) can be used: exportertest imports exporter, so the internal tests cannot.

// TestConfig is cfg with the settings it leaves zero that New refuses taken from
// DefaultConfig (Interval, VolumeConcurrency, VolumeTimeout, LiveConcurrency, LiveMaxWait).
// What a zero means on its own (no slow cadence, no CPU budget, no alignment) stays off,
// so that a test turns on only what it is about.
var TestConfig = testConfig

func testConfig(cfg Config) Config {
	d := DefaultConfig()
	pick := func(v *time.Duration, def time.Duration) {
		if *v == 0 {
			*v = def
		}
	}
	pick(&cfg.Interval, d.Interval)
	pick(&cfg.VolumeTimeout, d.VolumeTimeout)
	pick(&cfg.LiveMaxWait, d.LiveMaxWait)
	if cfg.VolumeConcurrency == 0 {
		cfg.VolumeConcurrency = d.VolumeConcurrency
	}
	if cfg.LiveConcurrency == 0 {
		cfg.LiveConcurrency = d.LiveConcurrency
	}
	return cfg
}

// TestVolumes builds one pod per volume name; a name in limits gets that sizeLimit.
var TestVolumes = volumes

// SourceReasons lists the reasons each source can report.
var SourceReasons = sourceReasons

// ScrapeHistory is how many arrivals of one scraper the aligner keeps.
const ScrapeHistory = scrapeHistory

// RefreshWalks is Refresh with the walks started under walksCtx, so that a cycle (ctx) may
// end while its walks go on.
func (e *Exporter) RefreshWalks(ctx, walksCtx context.Context) { e.refresh(ctx, walksCtx, 0) }

// WalkCycle runs the walks of one cycle over pods, as Refresh does after listing them, and
// returns what the cycle publishes; the walks run under ctx.
func (e *Exporter) WalkCycle(ctx context.Context, pods []part.Pod) []part.Result {
	return e.walks.Cycle(ctx, ctx, pods, 0)
}

// SetInformerLag sets how long a walk that found its volume missing waits for the informer
// to show the pod's deletion; without walks it does nothing.
func (e *Exporter) SetInformerLag(d time.Duration) {
	if e.walks != nil {
		e.walks.SetInformerLag(d)
	}
}

// WalksRunning returns the volumes with a walk in flight, periodic or live, as "uid/volume",
// sorted.
func (e *Exporter) WalksRunning() []string {
	running := e.walks.Running()
	out := make([]string, 0, len(running))
	for _, k := range running {
		out = append(out, k.UID+"/"+k.Name)
	}
	slices.Sort(out)
	return out
}

// WaitForWalks returns once every walk started, in the background too, has ended.
func (e *Exporter) WaitForWalks() { e.walks.Wait() }

// LatestWalk returns the result of the volume's last completed walk, which the next cycle
// publishes; false when none has completed.
func (e *Exporter) LatestWalk(uid, name string) (part.Result, bool) {
	return e.walks.Latest(part.Key{UID: uid, Name: name})
}

// SnapshotUIDs returns the pod UID of each volume the last cycle published, in order.
func (e *Exporter) SnapshotUIDs() []string {
	e.mu.RLock()
	defer e.mu.RUnlock()
	var out []string
	for _, v := range e.snap.volumes {
		out = append(out, v.UID)
	}
	return out
}

// UncheckedLinksCounter is emptydir_exporter_unchecked_hard_links_total.
func (e *Exporter) UncheckedLinksCounter() prometheus.Counter { return e.uncheckedLinks }

// MeasureErrorsCounter is emptydir_exporter_measurement_errors_total of source and reason.
func (e *Exporter) MeasureErrorsCounter(source, reason string) prometheus.Counter {
	return e.measureErrors.WithLabelValues(source, reason)
}

// UnchangedWalksCounter is emptydir_exporter_walks_unchanged_total, for testutil.ToFloat64.
func (e *Exporter) UnchangedWalksCounter() prometheus.Collector {
	return engineSeries{e: e, name: "emptydir_exporter_walks_unchanged_total"}
}

// DeferredWalksCounter is emptydir_exporter_walks_deferred_total of reason, for
// testutil.ToFloat64.
func (e *Exporter) DeferredWalksCounter(reason string) prometheus.Collector {
	return engineSeries{e: e, name: "emptydir_exporter_walks_deferred_total", label: "reason", value: reason}
}

// engineSeries collects the series of family name among the walk engine's, those whose label
// is value when label is set.
type engineSeries struct {
	e                  *Exporter
	name, label, value string
}

func (s engineSeries) Describe(ch chan<- *prometheus.Desc) { prometheus.DescribeByCollect(s, ch) }

func (s engineSeries) Collect(ch chan<- prometheus.Metric) {
	all := make(chan prometheus.Metric)
	go func() {
		s.e.walks.Collect(all)
		close(all)
	}()
	for m := range all {
		if !strings.Contains(m.Desc().String(), `fqName: "`+s.name+`"`) {
			continue
		}
		var pb dto.Metric
		if err := m.Write(&pb); err != nil {
			panic(err)
		}
		if s.label == "" || slices.ContainsFunc(pb.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == s.label && l.GetValue() == s.value }) {
			ch <- m
		}
	}
}

// NextCycle is when the cycle after the one planned at prevStart starts.
func (e *Exporter) NextCycle(prevStart time.Time, interval time.Duration) time.Time {
	return e.nextCycle(prevStart, interval)
}

// Aligned reports whether the exporter has a scrape aligner (Config.AlignToScrapes).
func (e *Exporter) Aligned() bool { return e.aligner != nil }
