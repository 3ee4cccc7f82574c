package node

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"github.com/emptydir-guard/emptydir-guard/exporter"
	"github.com/emptydir-guard/emptydir-guard/exporter/exportertest"
	"github.com/emptydir-guard/emptydir-guard/internal/fswalk"
)

// fixedPods is the node's pod list; the exporter sees it through exportertest.Pods, synced.
type fixedPods []exporter.PodVolumes

// volumes counts the volumes of the pods.
func (p fixedPods) volumes() int {
	n := 0
	for _, pv := range p {
		n += len(pv.Volumes)
	}
	return n
}

// countingSource is the filesystem source, counting the walks of volumes with and without a
// sizeLimit.
type countingSource struct {
	exporter.FilesystemSource
	limited, unlimited atomic.Int64
}

func (s *countingSource) MeasureVolume(ctx context.Context, p exporter.PodVolumes, v exporter.Volume, meter *fswalk.CPUMeter) (exporter.Measurement, error) {
	if v.LimitBytes != nil {
		s.limited.Add(1)
	} else {
		s.unlimited.Add(1)
	}
	return s.FilesystemSource.MeasureVolume(ctx, p, v, meter)
}

// node is one exporter over the generated node, served as the command serves it.
type node struct {
	exp     *exporter.Exporter
	source  *countingSource
	reg     *prometheus.Registry
	metrics http.Handler
	// usedDesc is emptydir_used_bytes' Desc, found once by usedBytes.
	usedDesc *prometheus.Desc
}

// schedule is how an exporter under test walks: the defaults, or the old behaviour.
type schedule struct {
	name              string
	unlimitedInterval time.Duration
	cpuBudget         float64
}

// The command's defaults (cmd/emptydir-exporter), and what the exporter did before the
// budget: every volume every interval.
var (
	defaults       = schedule{name: "ours at the defaults (others every 1m, budget 5 %)", unlimitedInterval: time.Minute, cpuBudget: 0.05}
	lowerBudget    = schedule{name: "ours, budget 4 %", unlimitedInterval: time.Minute, cpuBudget: 0.04}
	everyInterval  = schedule{name: "before: every volume every interval, no budget"}
	defaultCycle   = 10 * time.Second
	defaultScrape  = 5 * time.Second // the shipped PodMonitor's and ServiceMonitor's exporterInterval
	walkConc       = 4
	volumeConc     = 2
	defaultTimeout = time.Minute
)

func newNode(kubeletRoot string, pods fixedPods, s schedule) (*node, error) {
	src := &countingSource{FilesystemSource: exporter.FilesystemSource{KubeletRootDir: kubeletRoot, WalkConcurrency: walkConc}}
	cfg := exporter.DefaultConfig()
	cfg.NodeName, cfg.Source, cfg.Pods = "bench-node", src, exportertest.NewPods(pods...)
	cfg.Interval, cfg.VolumeConcurrency, cfg.VolumeTimeout = defaultCycle, volumeConc, defaultTimeout
	cfg.UnlimitedInterval, cfg.CPUBudget, cfg.AlignToScrapes = s.unlimitedInterval, s.cpuBudget, true
	exp, err := exporter.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("exporter: %w", err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(exp, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return &node{exp: exp, source: src, reg: reg, metrics: exp.ScrapeHandler(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))}, nil
}

// scrape renders /metrics as Prometheus gets it (gzip-compressed, from one scraper) and
// returns its size.
func (n *node) scrape() (int, error) {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	n.metrics.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		return 0, fmt.Errorf("/metrics answered %d: %s", rec.Code, rec.Body)
	}
	return rec.Body.Len(), nil
}

// volumeValues gathers one per-volume metric by volume, keyed "pod/volume".
func (n *node) volumeValues(name string) (map[string]float64, error) {
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
			out[label(m, "pod")+"/"+label(m, "volume")] = m.GetGauge().GetValue()
		}
	}
	return out, nil
}

// usedBytes is one volume's emptydir_used_bytes ("pod/volume") straight from the exporter's
// Collect on the calling goroutine, and the CPU that took on its thread (locked by the
// caller): the benchmark's own polls, which the exporter's share leaves out.
func (n *node) usedBytes(key string, series int) (float64, time.Duration, error) {
	start := threadCPU()
	if n.usedDesc == nil {
		descs := make(chan *prometheus.Desc, series)
		n.exp.Describe(descs)
		close(descs)
		for d := range descs {
			if strings.Contains(d.String(), `"emptydir_used_bytes"`) {
				n.usedDesc = d
			}
		}
	}
	ch := make(chan prometheus.Metric, series)
	n.exp.Collect(ch)
	close(ch)
	used := -1.0
	for m := range ch {
		if m.Desc() != n.usedDesc {
			continue
		}
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			return 0, 0, fmt.Errorf("emptydir_used_bytes: %w", err)
		}
		if label(&d, "pod")+"/"+label(&d, "volume") == key {
			used = d.GetGauge().GetValue()
		}
	}
	if used < 0 {
		return 0, 0, fmt.Errorf("no emptydir_used_bytes for %s", key)
	}
	return used, threadCPU() - start, nil
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
