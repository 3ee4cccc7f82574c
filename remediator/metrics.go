package remediator

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
)

const metricNamespace = "emptydir_remediator"

// metrics is the remediator's metric set (docs/metrics.md).
type metrics struct {
	webhookRequests *prometheus.CounterVec
	webhookDuration *prometheus.HistogramVec
	alerts          *prometheus.CounterVec
	skips           *prometheus.CounterVec
	evictions       *prometheus.CounterVec
	measureDuration prometheus.Histogram
	measureErrors   *prometheus.CounterVec
	measureReused   prometheus.Counter
	isLeader        prometheus.Gauge
	standby         *prometheus.CounterVec
	ledgerOps       *prometheus.CounterVec
	notices         *prometheus.CounterVec
}

// Results of a webhook delivered to a standby replica: the standby_requests_total label.
const (
	StandbyForwarded = "forwarded" // handed to the leader; the leader's answer was returned
	StandbyRefused   = "refused"   // answered 503 (Connection: close) so that Alertmanager retries
)

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		webhookRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricNamespace, Name: "webhook_requests_total",
			Help: "Webhook requests by HTTP status code.",
		}, []string{"code"}),
		// A vector without labels, as promhttp.InstrumentHandlerDuration wants one.
		webhookDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: metricNamespace, Name: "webhook_duration_seconds",
			Help:    "Time in seconds to handle one webhook request.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, nil),
		alerts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricNamespace, Name: "alerts_total",
			Help: "Alerts handled, by what came of them.",
		}, []string{"outcome"}),
		skips: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricNamespace, Name: "skips_total",
			Help: "Alerts that policy or the re-check declined, by reason.",
		}, []string{"reason"}),
		evictions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricNamespace, Name: "evictions_total",
			Help: "Eviction API calls and their results.",
		}, []string{"result"}),
		measureDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: metricNamespace, Name: "live_measurement_duration_seconds",
			Help:    "Time in seconds to get the live re-check of a volume.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}),
		measureErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricNamespace, Name: "live_measurement_errors_total",
			Help: "Live re-checks that failed, by reason.",
		}, []string{"reason"}),
		measureReused: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: metricNamespace, Name: "live_measurements_reused_total",
			Help: "Live re-checks answered from an earlier measurement of the same pod UID and volume.",
		}),
		isLeader: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: metricNamespace, Name: "is_leader",
			Help: "1 on the replica that holds the leader lease (always 1 without leader election).",
		}),
		standby: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricNamespace, Name: "standby_requests_total",
			Help: "Authenticated webhooks that reached this replica as a standby, by whether they were forwarded.",
		}, []string{"result"}),
		ledgerOps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricNamespace, Name: "ledger_operations_total",
			Help: "Operations on the eviction ledger ConfigMap, by op and result.",
		}, []string{"op", "result"}),
		notices: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricNamespace, Name: "notices_total",
			Help: "Exporter notices received, by whether they were handled or why not.",
		}, []string{"result"}),
	}
	m.webhookDuration.WithLabelValues()
	// Every known label value starts at 0 so that rate() and absent() work from the start.
	for _, o := range AllOutcomes {
		m.alerts.WithLabelValues(string(o))
	}
	for _, r := range AllSkipReasons {
		m.skips.WithLabelValues(r)
	}
	for _, r := range AllEvictionResults {
		m.evictions.WithLabelValues(r)
	}
	for _, r := range AllMeasureReasons {
		m.measureErrors.WithLabelValues(r)
	}
	for op, results := range map[string][]string{
		LedgerOpCacheRead: {LedgerResultSuccess, LedgerResultError},
		LedgerOpGet:       {LedgerResultSuccess, LedgerResultError},
		LedgerOpWrite:     {LedgerResultSuccess, LedgerResultConflict, LedgerResultError},
	} {
		for _, r := range results {
			m.ledgerOps.WithLabelValues(op, r)
		}
	}
	m.standby.WithLabelValues(StandbyForwarded)
	m.standby.WithLabelValues(StandbyRefused)
	for _, r := range AllNoticeResults {
		m.notices.WithLabelValues(r)
	}
	reg.MustRegister(m.webhookRequests, m.webhookDuration, m.alerts, m.skips, m.evictions,
		m.measureDuration, m.measureErrors, m.measureReused, m.isLeader, m.standby, m.ledgerOps, m.notices)
	return m
}

// newRegistry returns a registry with the standard Go and process collectors and the
// emptydir_remediator_build_info metric.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		versioncollector.NewCollector(metricNamespace),
	)
	return reg
}
