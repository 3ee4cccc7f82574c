package prombill

import (
	"encoding/json"
	"fmt"
	"time"
)

// Prometheus' settings that are no profile's: the Prometheus Operator's default rule
// evaluation interval, and how often Prometheus scrapes itself (often enough for its RSS
// and CPU to have several samples in a measurement window).
const (
	evaluationInterval = 30 * time.Second
	selfScrapeInterval = 5 * time.Second
	selfJob            = "prometheus"
)

// target is one simulated node's listener.
type target struct {
	addr string // host:port
	node string
}

// promSetup is what a Prometheus configuration is generated from.
type promSetup struct {
	jobs      []scrapeJob
	targets   []target
	ruleFiles []string
	selfAddr  string // Prometheus' own host:port
}

// The subset of prometheus.yml the benchmark writes. JSON is YAML, and Prometheus' strict
// YAML decoding checks every key.
type (
	promFile struct {
		Global        promGlobal     `json:"global"`
		RuleFiles     []string       `json:"rule_files"`
		ScrapeConfigs []scrapeConfig `json:"scrape_configs"`
	}
	promGlobal struct {
		ScrapeInterval     string `json:"scrape_interval"`
		EvaluationInterval string `json:"evaluation_interval"`
	}
	scrapeConfig struct {
		JobName        string              `json:"job_name"`
		ScrapeInterval string              `json:"scrape_interval"`
		ScrapeTimeout  string              `json:"scrape_timeout"`
		MetricsPath    string              `json:"metrics_path"`
		Params         map[string][]string `json:"params,omitempty"`
		HonorLabels    bool                `json:"honor_labels,omitempty"`
		StaticConfigs  []staticConfig      `json:"static_configs"`
	}
	staticConfig struct {
		Targets []string          `json:"targets"`
		Labels  map[string]string `json:"labels,omitempty"`
	}
)

// promConfig is the prometheus.yml of a run: every job of the profile over every target, and
// Prometheus scraping itself.
func promConfig(s promSetup) ([]byte, error) {
	if len(s.jobs) == 0 || len(s.targets) == 0 {
		return nil, fmt.Errorf("a configuration needs jobs (%d) and targets (%d)", len(s.jobs), len(s.targets))
	}
	f := promFile{
		Global:    promGlobal{ScrapeInterval: promDuration(selfScrapeInterval), EvaluationInterval: promDuration(evaluationInterval)},
		RuleFiles: s.ruleFiles,
	}
	for _, j := range s.jobs {
		if j.interval <= 0 {
			return nil, fmt.Errorf("job %s: interval %v must be positive", j.name, j.interval)
		}
		sc := scrapeConfig{JobName: j.name, ScrapeInterval: promDuration(j.interval), ScrapeTimeout: promDuration(j.interval),
			MetricsPath: j.path, Params: j.params,
			// As the shipped PodMonitor: the volume series' own namespace and pod labels win.
			HonorLabels: true}
		for _, t := range s.targets {
			// The labels the Prometheus Operator gives a PodMonitor's target, so that the
			// self-metrics carry what they carry in a cluster.
			sc.StaticConfigs = append(sc.StaticConfigs, staticConfig{Targets: []string{t.addr}, Labels: map[string]string{
				"namespace": "emptydir-guard", "pod": "emptydir-exporter-" + t.node, "container": "exporter",
				"endpoint": "metrics", "kubernetes_node": t.node}})
		}
		f.ScrapeConfigs = append(f.ScrapeConfigs, sc)
	}
	f.ScrapeConfigs = append(f.ScrapeConfigs, scrapeConfig{JobName: selfJob, ScrapeInterval: promDuration(selfScrapeInterval),
		ScrapeTimeout: promDuration(selfScrapeInterval), MetricsPath: "/metrics",
		StaticConfigs: []staticConfig{{Targets: []string{s.selfAddr}}}})
	out, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding prometheus.yml: %w", err)
	}
	return out, nil
}

// promDuration spells d as Prometheus reads durations: whole seconds, else milliseconds.
func promDuration(d time.Duration) string {
	if d%time.Second == 0 {
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return fmt.Sprintf("%dms", d/time.Millisecond)
}
