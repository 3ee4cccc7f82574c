// Package prombill measures what the exporter costs a real Prometheus server per node: N
// simulated nodes, each a real exporter.Exporter running its collection cycles over a busy
// node's pods (node.go) and served on its own loopback listener, scraped and ruled by Debian's
// /usr/bin/prometheus with the profile's rules. BenchmarkPrometheusBill runs it for every
// profile (an exporter configuration, the scrape jobs and the rules that go with it) and writes
// the table into docs/performance.md, section prometheus-bill.
//
// A profile is how it adjusts exporter.DefaultConfig, how a node builds its HTTP handler, the
// scrape jobs Prometheus runs against that handler and the rules file it loads; the shipped
// ones are read from the kustomize base and use the shipped rules (shipped.go), so what is
// measured is what users install.
package prombill

import (
	"net/http"
	"net/url"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/emptydir-guard/emptydir-guard/exporter"
	"github.com/emptydir-guard/emptydir-guard/internal/metricfilter"
)

// scrapeJob is one scrape job of a profile, as a PodMonitor endpoint would configure it.
type scrapeJob struct {
	name     string
	path     string
	params   url.Values // the URL parameters Prometheus sends (collect[], exclude[]); nil: none
	interval time.Duration
}

// profile is an exporter configuration and the scrape configuration that goes with it.
type profile struct {
	name string
	// configure adjusts exporter.DefaultConfig; nil keeps the defaults.
	configure func(*exporter.Config)
	// handler builds a node's whole HTTP handler over its exporter and the command's other
	// collectors by name (commandCollectors): every job's path is served by it.
	handler func(exp *exporter.Exporter, others map[string][]prometheus.Collector) (http.Handler, error)
	jobs    []scrapeJob
	// rules is the path of the rules file Prometheus loads, from this package's directory.
	rules string
}

// chartScrapeInterval is the chart's default exporter scrape interval (the PodMonitor's and
// ServiceMonitor's interval).
const chartScrapeInterval = 5 * time.Second

// allProfiles are measured in order; the first is the reference the others' ratios are
// against: the exporter as it was installed before the fast/slow split and the opt-in
// families, then the shipped ones, read from the kustomize base (the chart renders the same,
// test/helm checks): the defaults, and the large-cluster profile.
func allProfiles() ([]profile, error) {
	defaults, err := shippedProfile("defaults")
	if err != nil {
		return nil, err
	}
	large, err := shippedProfile("large-cluster profile", "large-cluster")
	if err != nil {
		return nil, err
	}
	return []profile{previousDefaults, defaults, large}, nil
}

// previousDefaults is the exporter as the chart installed it before the split: one job
// scraping every family (the opt-in ones included) from /metrics every 5s, with the rules
// shipped then (a copy from the commit before the split).
var previousDefaults = profile{
	name: "before (one job, every family)",
	handler: func(exp *exporter.Exporter, others map[string][]prometheus.Collector) (http.Handler, error) {
		reg := prometheus.NewRegistry()
		if err := reg.Register(exp); err != nil {
			return nil, err
		}
		for _, cs := range others {
			for _, c := range cs {
				if err := reg.Register(c); err != nil {
					return nil, err
				}
			}
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", exp.ScrapeHandler(promhttp.HandlerFor(reg, promhttp.HandlerOpts{})))
		return mux, nil
	},
	jobs:  []scrapeJob{{name: "emptydir-exporter", path: "/metrics", interval: chartScrapeInterval}},
	rules: filepath.Join("testdata", "rules-before.yml"),
}

// commandHandler serves /metrics as cmd/emptydir-exporter does, with its metric lists.
func commandHandler(allow, deny, optIn []string) func(*exporter.Exporter, map[string][]prometheus.Collector) (http.Handler, error) {
	return func(exp *exporter.Exporter, others map[string][]prometheus.Collector) (http.Handler, error) {
		f, err := metricfilter.New(allow, deny)
		if err != nil {
			return nil, err
		}
		if f, err = f.WithOptIn(exporter.OptInFamilies, optIn); err != nil {
			return nil, err
		}
		h, err := exp.MetricsHandler(exporter.MetricsHandlerOpts{Others: others, Filter: f.Gatherer})
		if err != nil {
			return nil, err
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", h)
		return mux, nil
	}
}

// exporterConfig is the profile's exporter configuration for a node.
func (p profile) exporterConfig() exporter.Config {
	cfg := exporter.DefaultConfig()
	// Many simulated nodes share this process: each one's budget counts its own walks only.
	cfg.ProcessCPU = nil
	if p.configure != nil {
		p.configure(&cfg)
	}
	return cfg
}

// requestURI is the path and query a job's scrapes ask for.
func (j scrapeJob) requestURI() string {
	if len(j.params) == 0 {
		return j.path
	}
	return j.path + "?" + j.params.Encode()
}
