// Package exporter measures the emptyDir volumes of the pods on one node and
// publishes them as Prometheus metrics, and serves live measurements on request.
package exporter

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Config wires an Exporter.
type Config struct {
	// NodeName is the value of the node label.
	NodeName string
	// Source measures volumes, for the periodic collection and the live endpoint.
	Source Source
	// Pods tells which pods on the node have emptyDir volumes.
	Pods PodLister
	// Logger receives one line per failed volume and per cycle at debug level.
	Logger *slog.Logger
	// LiveConcurrency bounds live measurements running at once; 0 means 2.
	LiveConcurrency int
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Exporter keeps the result of the latest collection cycle and publishes it. It
// implements prometheus.Collector: metrics are built from the snapshot at scrape
// time, so a deleted pod's series vanish after the next cycle.
type Exporter struct {
	cfg Config
	now func() time.Time
	log *slog.Logger

	mu   sync.RWMutex
	snap snapshot

	collections   *prometheus.CounterVec
	measureErrors *prometheus.CounterVec
	watchErrors   prometheus.Counter
	liveRequests  *prometheus.CounterVec
	liveSlots     chan struct{}
}

// snapshot is what one collection cycle produced.
type snapshot struct {
	volumes     []VolumeResult // each with a measurement, fresh or the last good one
	duration    time.Duration
	success     bool
	lastSuccess time.Time
	pods        int
	volumeCount int
	cycles      int
}

type volumeKey struct{ uid, volume string }

// New checks cfg and builds an Exporter.
func New(cfg Config) (*Exporter, error) {
	if cfg.Source == nil || cfg.Pods == nil {
		return nil, errors.New("exporter: Source and Pods are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.LiveConcurrency <= 0 {
		cfg.LiveConcurrency = 2
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	constLabels := prometheus.Labels{"node": cfg.NodeName}
	e := &Exporter{
		cfg: cfg,
		now: now,
		log: cfg.Logger,
		collections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name:        "emptydir_exporter_collections_total",
			Help:        "Collection cycles, by result.",
			ConstLabels: constLabels,
		}, []string{"result"}),
		measureErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name:        "emptydir_exporter_measurement_errors_total",
			Help:        "Volumes that could not be measured, by source and reason.",
			ConstLabels: constLabels,
		}, []string{"source", "reason"}),
		watchErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name:        "emptydir_exporter_pod_watch_errors_total",
			Help:        "Errors of the pod list/watch against the API server; the exporter keeps serving from its cache meanwhile.",
			ConstLabels: constLabels,
		}),
		liveRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name:        "emptydir_exporter_live_requests_total",
			Help:        "Live measurement requests, by HTTP status code.",
			ConstLabels: constLabels,
		}, []string{"code"}),
		liveSlots: make(chan struct{}, cfg.LiveConcurrency),
	}
	// Series that exist at 0 before the first failure let rate() and increase()
	// see the first one, and keep dashboards from showing "no data" on a healthy node.
	for _, r := range sourceReasons[cfg.Source.Name()] {
		e.measureErrors.WithLabelValues(cfg.Source.Name(), r)
	}
	for _, code := range []int{http.StatusOK, http.StatusBadRequest, http.StatusNotFound, http.StatusTooManyRequests, http.StatusServiceUnavailable} {
		e.liveRequests.WithLabelValues(strconv.Itoa(code))
	}
	e.collections.WithLabelValues("success")
	e.collections.WithLabelValues("error")
	return e, nil
}

// Run refreshes the snapshot now and then every interval until ctx ends.
func (e *Exporter) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		cycleCtx, cancel := context.WithTimeout(ctx, interval)
		e.Refresh(cycleCtx)
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Refresh runs one collection cycle and replaces the snapshot. A volume that fails
// keeps its last good measurement, with its old time, so that
// emptydir_measurement_age_seconds shows it is not fresh.
func (e *Exporter) Refresh(ctx context.Context) {
	start := e.now()
	success := true
	var pods []PodVolumes
	if !e.cfg.Pods.HasSynced() {
		success = false
		e.log.Warn("pod informer has not synced yet; publishing no volumes")
	} else {
		var err error
		if pods, err = e.cfg.Pods.List(); err != nil {
			success = false
			e.log.Error("listing pods", "err", err)
		}
	}

	e.mu.RLock()
	lastGood := make(map[volumeKey]VolumeResult, len(e.snap.volumes))
	for _, v := range e.snap.volumes {
		lastGood[volumeKey{v.UID, v.Volume.Name}] = v
	}
	prev := e.snap
	e.mu.RUnlock()

	source := e.cfg.Source.Name()
	results := e.cfg.Source.Measure(ctx, pods)
	kept := make([]VolumeResult, 0, len(results))
	for _, r := range results {
		if r.Err == nil {
			kept = append(kept, r)
			continue
		}
		success = false
		reason := reasonOf(r.Err)
		e.measureErrors.WithLabelValues(source, reason).Inc()
		e.log.Warn("measuring volume", "namespace", r.Namespace, "pod", r.Pod, "uid", r.UID,
			"volume", r.Volume.Name, "source", source, "reason", reason, "err", r.Err)
		if old, ok := lastGood[volumeKey{r.UID, r.Volume.Name}]; ok {
			old.Volume = r.Volume // the spec (limit) may have changed; the numbers have not been re-read
			kept = append(kept, old)
		}
	}

	next := snapshot{
		volumes:     kept,
		duration:    e.now().Sub(start),
		success:     success,
		lastSuccess: prev.lastSuccess,
		pods:        len(pods),
		volumeCount: len(results),
		cycles:      prev.cycles + 1,
	}
	if success {
		next.lastSuccess = e.now()
		e.collections.WithLabelValues("success").Inc()
	} else {
		e.collections.WithLabelValues("error").Inc()
	}
	e.mu.Lock()
	e.snap = next
	e.mu.Unlock()
	e.log.Debug("collection cycle done", "pods", next.pods, "volumes", next.volumeCount,
		"success", success, "duration", next.duration)
}

// WatchErrorHandler counts list/watch failures of the pod informer; hand it to
// the informer's SetWatchErrorHandler.
func (e *Exporter) WatchErrorHandler(err error) {
	e.watchErrors.Inc()
	e.log.Warn("pod watch failed; serving pods from cache", "err", err)
}
