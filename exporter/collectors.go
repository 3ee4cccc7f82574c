package exporter

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/emptydir-guard/emptydir-guard/exporter/part"
)

// The exporter's series fall into collectors that a scrape selects with the URL parameters
// collect[] (only these) or exclude[] (all but these), as node_exporter's do. Every series
// the over-limit alerts read is in CollectorTrigger, so that one scrape job can fetch those
// every few seconds, the pace of remediation, and another job the rest far less often: most
// of the exporter's series then cost a Prometheus a fraction of the samples (docs/deploy.md).
const (
	// CollectorTrigger: the over-limit series of every emptyDir, pod and container over its
	// limit, and the usage and limit of every emptyDir with a sizeLimit, of every pod with an
	// ephemeral-storage limit and of every container with its own.
	CollectorTrigger = "trigger"
	// CollectorVolumes: the other emptyDir series (usage of volumes without a sizeLimit,
	// inodes, measurement details) and the emptyDirs' filesystem.
	CollectorVolumes = "volumes"
	// CollectorEphemeralStorage: the other ephemeral-storage series (parts, measurement
	// details, usage of containers without a limit).
	CollectorEphemeralStorage = "ephemeral_storage"
	// CollectorExporter: the exporter's own series.
	CollectorExporter = "exporter"
)

// TriggerFamilies are the families the shipped over-limit alerts (rules/) read: published only
// while a usage exceeds its limit, so that evaluating the alerts every 2 s costs a Prometheus
// the few series over their limits, not one per volume, pod and container of the cluster.
// Hidden, they leave the remediator without alerts.
var TriggerFamilies = []string{
	"emptydir_over_limit_bytes",
	"emptydir_pod_ephemeral_storage_over_limit_bytes",
	"emptydir_container_ephemeral_storage_over_limit_bytes",
}

// OptInFamilies are published only when --metric-opt-in-list names them, as
// kube-state-metrics' opt-in metrics: one series or more per volume, pod or container each,
// they were most of a node's series and no shipped alert needs them. The filesystem's
// capacity and available bytes are published once per node instead
// (emptydir_filesystem_*), the age of the oldest measurement behind a trigger series once
// per node (emptydir_exporter_oldest_trigger_measurement_age_seconds).
var OptInFamilies = []string{
	"emptydir_capacity_bytes", "emptydir_available_bytes", "emptydir_inodes_used",
	"emptydir_measurement_info", "emptydir_measurement_age_seconds", "emptydir_measurement_unchanged_timestamp_seconds",
	"emptydir_pod_ephemeral_storage_part_bytes",
	"emptydir_pod_ephemeral_storage_measurement_age_seconds", "emptydir_container_ephemeral_storage_part_bytes",
}

// selection is a set of the exporter's collectors.
type selection uint8

const (
	selectTrigger selection = 1 << iota
	selectVolumes
	selectEphemeralStorage
	selectExporter
	selectAll = selectTrigger | selectVolumes | selectEphemeralStorage | selectExporter
)

// selectedCollector collects the series of one selection.
type selectedCollector struct {
	e   *Exporter
	sel selection
}

// Describe sends nothing, which makes the collector unchecked: collectors share families
// (emptydir_used_bytes of a volume with a sizeLimit is a trigger series, of one without a
// volumes series), and a registry would refuse the second one's descriptors as duplicates.
// Gathering still checks every series.
func (selectedCollector) Describe(chan<- *prometheus.Desc) {}

func (c selectedCollector) Collect(ch chan<- prometheus.Metric) { c.e.collect(ch, c.sel) }

// Collectors returns the exporter's collectors by name; together they collect what the
// Exporter itself does.
func (e *Exporter) Collectors() map[string]prometheus.Collector {
	return map[string]prometheus.Collector{
		CollectorTrigger:          selectedCollector{e, selectTrigger},
		CollectorVolumes:          selectedCollector{e, selectVolumes},
		CollectorEphemeralStorage: selectedCollector{e, selectEphemeralStorage},
		CollectorExporter:         selectedCollector{e, selectExporter},
	}
}

// diskFilesystem returns the filesystem figures of the newest measurement of a disk-medium
// emptyDir: they all live under the kubelet's root dir, on one filesystem.
func (s snapshot) diskFilesystem() (part.Measurement, bool) {
	var newest part.Measurement
	found := false
	for _, r := range s.volumes {
		m := r.Measurement
		if r.Part.Kind != part.KindEmptyDir || r.Part.Medium != part.MediumDisk || m.CapacityBytes <= 0 {
			continue
		}
		if !found || m.MeasuredAt.After(newest.MeasuredAt) {
			newest, found = m, true
		}
	}
	return newest, found
}

// oldestTriggerMeasurement returns when the oldest measurement behind a trigger series
// started: of an emptyDir with a sizeLimit, or of a part of a pod with an ephemeral-storage
// limit.
func (s snapshot) oldestTriggerMeasurement() (time.Time, bool) {
	measuredPods := map[string]bool{}
	for _, p := range s.storage {
		measuredPods[p.UID] = true
	}
	var oldest time.Time
	for _, r := range s.volumes {
		at := r.Measurement.MeasuredAt
		trigger := measuredPods[r.UID] || (r.Part.Kind == part.KindEmptyDir && r.Part.LimitBytes != nil)
		if trigger && !at.IsZero() && (oldest.IsZero() || at.Before(oldest)) {
			oldest = at
		}
	}
	return oldest, !oldest.IsZero()
}

// MetricsHandlerOpts configures MetricsHandler.
type MetricsHandlerOpts struct {
	// Others are collectors beside the exporter's own, by name: new names (the Go runtime's,
	// the process's) or one of the exporter's, which they join (its build info).
	Others map[string][]prometheus.Collector
	// Filter narrows what is gathered (metric allow and deny lists); nil: nothing.
	Filter func(prometheus.Gatherer) prometheus.Gatherer
	// Handler is promhttp's configuration.
	Handler promhttp.HandlerOpts
}

// MetricsHandler serves the exporter's collectors and opts.Others, all of them or those a
// request selects with collect[] or exclude[] (as node_exporter does). Only the scrapes that
// fetch the trigger series reach ScrapeHandler's alignment: a slower scrape of the rest must
// not pull the collection cycle off the fast scrape's phase. A bad selection is answered
// 400 and names the collectors.
func (e *Exporter) MetricsHandler(opts MetricsHandlerOpts) (http.Handler, error) {
	collectors := map[string][]prometheus.Collector{}
	for name, c := range e.Collectors() {
		collectors[name] = []prometheus.Collector{c}
	}
	for name, cs := range opts.Others {
		collectors[name] = append(collectors[name], cs...)
	}
	filter := opts.Filter
	if filter == nil {
		filter = func(g prometheus.Gatherer) prometheus.Gatherer { return g }
	}
	h := &metricsHandler{e: e, collectors: collectors, filter: filter, opts: opts.Handler}
	all, err := h.handlerFor(slices.Sorted(maps.Keys(collectors)))
	if err != nil {
		return nil, err
	}
	h.all = e.ScrapeHandler(all)
	return h, nil
}

type metricsHandler struct {
	e          *Exporter
	collectors map[string][]prometheus.Collector
	filter     func(prometheus.Gatherer) prometheus.Gatherer
	opts       promhttp.HandlerOpts
	all        http.Handler // every collector, built once: what a plain scrape gets
}

func (h *metricsHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	collect, exclude := q["collect[]"], q["exclude[]"]
	if len(collect) == 0 && len(exclude) == 0 {
		h.all.ServeHTTP(w, r)
		return
	}
	names, err := h.selected(collect, exclude)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	handler, err := h.handlerFor(names)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if slices.Contains(names, CollectorTrigger) {
		handler = h.e.ScrapeHandler(handler)
	}
	handler.ServeHTTP(w, r)
}

// selected returns the names of the collectors a request selects, sorted.
func (h *metricsHandler) selected(collect, exclude []string) ([]string, error) {
	if len(collect) > 0 && len(exclude) > 0 {
		return nil, errors.New("collect[] and exclude[] cannot be combined: select collectors with one of them")
	}
	known := slices.Sorted(maps.Keys(h.collectors))
	for _, name := range append(slices.Clone(collect), exclude...) {
		if !slices.Contains(known, name) {
			return nil, fmt.Errorf("unknown collector %q: the collectors are %s", name, strings.Join(known, ", "))
		}
	}
	if len(collect) > 0 {
		return slices.Compact(slices.Sorted(slices.Values(collect))), nil
	}
	return slices.DeleteFunc(known, func(name string) bool { return slices.Contains(exclude, name) }), nil
}

// handlerFor builds the handler of the named collectors, on a registry of their own as
// node_exporter builds one per filtered request: registries are cheap beside a scrape.
func (h *metricsHandler) handlerFor(names []string) (http.Handler, error) {
	reg := prometheus.NewRegistry()
	for _, name := range names {
		for _, c := range h.collectors[name] {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("registering collector %q: %w", name, err)
			}
		}
	}
	return promhttp.HandlerFor(h.filter(reg), h.opts), nil
}
