package walk

import (
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/emptydir-guard/emptydir-guard/exporter/change"
)

// Reasons a due walk was deferred to a later cycle, as the reason label spells them.
const (
	// DeferredCPUBudget: the CPU budget had no credit left for it.
	DeferredCPUBudget = "cpu_budget"
	// DeferredNoSlot: every walk slot stayed busy until the cycle ended.
	DeferredNoSlot = "no_slot"
)

// The engine's series: every one of them is built here.
var (
	walkCPUDesc = prometheus.NewDesc("emptydir_exporter_walk_cpu_seconds_total",
		"CPU seconds the periodic walks spent, which --collection.cpu-budget bounds.", []string{"node"}, nil)
	namespaceWalkCPUDesc = prometheus.NewDesc("emptydir_exporter_namespace_walk_cpu_seconds_total",
		"CPU seconds the periodic walks of the namespace's pods on the node spent.", []string{"node", "namespace"}, nil)
	namespaceFloorWalksDesc = prometheus.NewDesc("emptydir_exporter_namespace_floor_walks_total",
		"Walks of the namespace's overdue volumes started on its share of the CPU budget.", []string{"node", "namespace"}, nil)
	budgetDesc = prometheus.NewDesc("emptydir_exporter_cpu_budget_ratio",
		"The collection's CPU budget as a share of one core; absent without a budget.", []string{"node"}, nil)
	budgetRemainingDesc = prometheus.NewDesc("emptydir_exporter_cpu_budget_remaining_seconds",
		"CPU seconds the walks may still spend now; at or below 0, due walks wait.", []string{"node"}, nil)
)

// metrics are the engine's counters.
type metrics struct {
	node     string
	deferred *prometheus.CounterVec
	// marks and unchanged are set with a change signal.
	marks     *prometheus.CounterVec
	unchanged prometheus.Counter
	log       *slog.Logger
	// markWarned holds the reasons for a missing change mark already logged at warning level.
	markWarned sync.Map
}

// newMetrics builds the counters of the walks of node, those of the change marks with signal.
// Series that exist at 0 before the first deferral let rate() and increase() see it.
func newMetrics(node string, signal bool, log *slog.Logger) *metrics {
	constLabels := prometheus.Labels{"node": node}
	m := &metrics{node: node, log: log}
	m.deferred = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name:        "emptydir_exporter_walks_deferred_total",
		Help:        "Due volume walks not started in their cycle, by reason.",
		ConstLabels: constLabels,
	}, []string{"reason"})
	for _, r := range []string{DeferredCPUBudget, DeferredNoSlot} {
		m.deferred.WithLabelValues(r)
	}
	if signal {
		m.marks = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name:        "emptydir_exporter_change_marks_total",
			Help:        "Reads of the pods' change marks, by outcome: read, or why a pod has none.",
			ConstLabels: constLabels,
		}, []string{"outcome"})
		m.marks.WithLabelValues(change.MarkRead)
		m.unchanged = prometheus.NewCounter(prometheus.CounterOpts{
			Name:        "emptydir_exporter_walks_unchanged_total",
			Help:        "Walks not started because the pod's change mark vouched the part unchanged.",
			ConstLabels: constLabels,
		})
	}
	return m
}

// noteMark counts the outcome of reading a pod's change mark, and logs the first failure of
// each reason as a warning: the node then walks those pods as without a signal.
func (m *metrics) noteMark(outcome string, err error) {
	m.marks.WithLabelValues(outcome).Inc()
	if err == nil {
		return
	}
	if _, seen := m.markWarned.LoadOrStore(outcome, true); !seen {
		m.log.Warn("a pod has no change mark: its parts are walked at their cadence (further ones at debug level)", "reason", outcome, "err", err)
		return
	}
	m.log.Debug("a pod has no change mark", "reason", outcome, "err", err)
}

// Describe sends the descriptors of the engine's series.
func (w *Engine) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{walkCPUDesc, namespaceWalkCPUDesc, namespaceFloorWalksDesc, budgetDesc, budgetRemainingDesc} {
		ch <- d
	}
	w.metrics.deferred.Describe(ch)
	if w.metrics.marks != nil {
		w.metrics.marks.Describe(ch)
		w.metrics.unchanged.Describe(ch)
	}
}

// Collect sends the engine's series: what the walks spent, in all and by namespace, the CPU
// budget, and the counters.
func (w *Engine) Collect(ch chan<- prometheus.Metric) {
	node := w.metrics.node
	ch <- prometheus.MustNewConstMetric(walkCPUDesc, prometheus.CounterValue, w.cpuSpent().Seconds(), node)
	w.collectNamespaces(ch)
	if w.budget != nil {
		ch <- prometheus.MustNewConstMetric(budgetDesc, prometheus.GaugeValue, w.budget.Share(), node)
		ch <- prometheus.MustNewConstMetric(budgetRemainingDesc, prometheus.GaugeValue, w.budget.Remaining().Seconds(), node)
	}
	w.metrics.deferred.Collect(ch)
	if w.metrics.marks != nil {
		w.metrics.marks.Collect(ch)
		w.metrics.unchanged.Collect(ch)
	}
}

// collectNamespaces sends what the walks of each namespace have spent.
func (w *Engine) collectNamespaces(ch chan<- prometheus.Metric) {
	var metrics []prometheus.Metric // sent once w.mu is released: a slow scrape holds no cycle
	w.mu.Lock()
	for name, ns := range w.namespaces {
		metrics = append(metrics, prometheus.MustNewConstMetric(namespaceWalkCPUDesc, prometheus.CounterValue,
			time.Duration(ns.cpu.Load()).Seconds(), w.metrics.node, name))
		if w.budget != nil {
			metrics = append(metrics, prometheus.MustNewConstMetric(namespaceFloorWalksDesc, prometheus.CounterValue,
				float64(ns.floorWalks), w.metrics.node, name))
		}
	}
	w.mu.Unlock()
	for _, m := range metrics {
		ch <- m
	}
}
