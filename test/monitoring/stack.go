// Package monitoring runs a real Prometheus and Alertmanager beside a test cluster
// (test/cluster), inside its network namespace and wired like a production install of
// emptyDir guard, and queries them for the end-to-end tests.
package monitoring

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"

	"github.com/emptydir-guard/emptydir-guard/test/cluster"
)

// Default binaries of the Debian prometheus and prometheus-alertmanager packages.
const (
	DefaultPrometheusBin   = "/usr/bin/prometheus"
	DefaultAlertmanagerBin = "/usr/bin/prometheus-alertmanager"
)

// Options configures Start: a real Prometheus and Alertmanager inside the cluster's network
// namespace, wired like a production install of emptyDir guard.
type Options struct {
	// RulesFiles are Prometheus rule files (the project's rules/emptydir-guard.rules.yml).
	RulesFiles []string
	// ExporterTargets and RemediatorTargets are host:port scrape targets inside the namespace,
	// scraped by the jobs "emptydir-exporter" and "emptydir-remediator".
	ExporterTargets   []string
	RemediatorTargets []string
	// AlertmanagerConfig is the Alertmanager configuration to derive from (the project's
	// deploy/alertmanager/alertmanager.yml). Every webhook of the receiver named
	// "emptydir-remediator" is pointed at WebhookURL with WebhookTokenFile as its bearer
	// credentials_file, and the timers of the routes to it are shortened. Empty: a config
	// with the same route is generated.
	AlertmanagerConfig string
	// WebhookURL is where Alertmanager posts EmptyDirOverLimit (the remediator's /webhook).
	WebhookURL string
	// WebhookToken is written to a file in WorkDir and used as credentials_file.
	WebhookToken string
	// PrometheusAddr and AlertmanagerAddr are listen addresses inside the namespace; default
	// 127.0.0.1:19090 and 127.0.0.1:19093.
	PrometheusAddr, AlertmanagerAddr string
	// ScrapeInterval is also the rule evaluation interval; default 5s.
	ScrapeInterval time.Duration
	// GroupWait, GroupInterval and RepeatInterval of the remediator route; default 1s, 5s, 10s.
	GroupWait, GroupInterval, RepeatInterval time.Duration
	// PrometheusBin and AlertmanagerBin default to the Debian packages' binaries.
	PrometheusBin, AlertmanagerBin string
	// ReadyTimeout bounds the wait for both to be ready; default 1m.
	ReadyTimeout time.Duration
}

// Stack is a running Prometheus + Alertmanager pair inside a cluster's namespace. Both
// processes are tracked by the cluster (StartProcess), so Cluster.Stop ends them.
type Stack struct {
	procs            processes
	prometheus       promv1.API
	alertmanager     alertmanagerClient
	PrometheusAddr   string
	AlertmanagerAddr string
	// PrometheusConfigFile and AlertmanagerConfigFile are the generated configurations.
	PrometheusConfigFile, AlertmanagerConfigFile string
}

// PrometheusURL is the base URL of Prometheus, reachable inside the namespace (and from the
// test process through Cluster.HTTPClient).
func (m *Stack) PrometheusURL() string { return "http://" + m.PrometheusAddr }

// AlertmanagerURL is the base URL of Alertmanager inside the namespace.
func (m *Stack) AlertmanagerURL() string { return "http://" + m.AlertmanagerAddr }

// Start starts Prometheus and Alertmanager inside the cluster's namespace with generated
// configurations (data and configs under WorkDir/monitoring-*) and waits until both answer
// ready.
func Start(ctx context.Context, c *cluster.Cluster, o Options) (*Stack, error) {
	if o.PrometheusAddr == "" {
		o.PrometheusAddr = "127.0.0.1:19090"
	}
	if o.AlertmanagerAddr == "" {
		o.AlertmanagerAddr = "127.0.0.1:19093"
	}
	if o.ScrapeInterval == 0 {
		o.ScrapeInterval = 5 * time.Second
	}
	defaultRouteTimings(&o.GroupWait, &o.GroupInterval, &o.RepeatInterval)
	if o.PrometheusBin == "" {
		o.PrometheusBin = DefaultPrometheusBin
	}
	if o.AlertmanagerBin == "" {
		o.AlertmanagerBin = DefaultAlertmanagerBin
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = time.Minute
	}
	for _, b := range []string{o.PrometheusBin, o.AlertmanagerBin} {
		if _, err := os.Stat(b); err != nil {
			return nil, fmt.Errorf("%s: %w (install the Debian packages prometheus and prometheus-alertmanager: hack/install-deps.sh)", b, err)
		}
	}
	if o.WebhookURL == "" {
		return nil, errors.New("monitoring: WebhookURL is required")
	}

	// A fresh directory per call: a cluster may run several stacks one after the other.
	dir, err := workDir(c, "monitoring-")
	if err != nil {
		return nil, err
	}
	for _, d := range []string{filepath.Join(dir, "prometheus-data"), filepath.Join(dir, "alertmanager-data")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	httpClient := c.HTTPClient(nil)
	m := &Stack{procs: processes{c: c}, PrometheusAddr: o.PrometheusAddr, AlertmanagerAddr: o.AlertmanagerAddr,
		PrometheusConfigFile: filepath.Join(dir, "prometheus.yml"), AlertmanagerConfigFile: filepath.Join(dir, "alertmanager.yml")}
	if err := m.connect(c); err != nil {
		return nil, err
	}

	// Configurations first, so that a bad one starts nothing.
	tokenFile, err := writeToken(dir, o.WebhookToken)
	if err != nil {
		return nil, err
	}
	amCfg, err := AlertmanagerConfig(o.AlertmanagerBin, o.AlertmanagerConfig, o.WebhookURL, tokenFile, o.GroupWait, o.GroupInterval, o.RepeatInterval)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(m.AlertmanagerConfigFile, amCfg, 0o644); err != nil {
		return nil, err
	}
	var rules []string
	for i, f := range o.RulesFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("rules: %w", err)
		}
		p := filepath.Join(dir, fmt.Sprintf("rules-%d-%s", i, filepath.Base(f)))
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return nil, err
		}
		rules = append(rules, p)
	}
	promCfg, err := PrometheusConfig(o.ScrapeInterval, rules, o.AlertmanagerAddr, o.ExporterTargets, o.RemediatorTargets)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(m.PrometheusConfigFile, promCfg, 0o644); err != nil {
		return nil, err
	}
	if err := m.procs.start("alertmanager", o.AlertmanagerBin,
		"--config.file="+m.AlertmanagerConfigFile,
		"--storage.path="+filepath.Join(dir, "alertmanager-data"),
		"--web.listen-address="+o.AlertmanagerAddr,
		"--web.external-url=http://"+o.AlertmanagerAddr+"/",
		"--cluster.listen-address=", // no HA gossip: nothing to peer with, and no fixed port
		"--log.level=debug"); err != nil {
		return nil, err
	}
	if err := m.procs.start("prometheus", o.PrometheusBin,
		"--config.file="+m.PrometheusConfigFile,
		"--storage.tsdb.path="+filepath.Join(dir, "prometheus-data"),
		"--web.listen-address="+o.PrometheusAddr,
		"--web.external-url=http://"+o.PrometheusAddr+"/"); err != nil {
		m.Stop()
		return nil, err
	}

	wctx, cancel := context.WithTimeout(ctx, o.ReadyTimeout)
	defer cancel()
	for _, w := range []struct{ name, url string }{
		{"prometheus", m.PrometheusURL() + "/-/ready"},
		{"alertmanager", m.AlertmanagerURL() + "/-/ready"},
	} {
		if err := waitReady(wctx, httpClient, w.url); err != nil {
			m.Stop()
			return nil, fmt.Errorf("%s not ready: %w\n%s", w.name, err, c.LogTail(w.name, 3000))
		}
	}
	c.Logf("prometheus at %s, alertmanager at %s (inside %s)", m.PrometheusURL(), m.AlertmanagerURL(), c.NetnsPath())
	return m, nil
}

// connect makes the Prometheus and Alertmanager API clients for the stack's addresses,
// dialling inside the cluster's namespace.
func (m *Stack) connect(c *cluster.Cluster) error {
	httpClient := c.HTTPClient(nil)
	prom, err := api.NewClient(api.Config{Address: m.PrometheusURL(), Client: httpClient})
	if err != nil {
		return fmt.Errorf("prometheus client: %w", err)
	}
	m.prometheus = promv1.NewAPI(prom)
	m.alertmanager = alertmanagerClient{http: httpClient, base: m.AlertmanagerURL()}
	return nil
}

// Stop ends Prometheus and Alertmanager (SIGTERM, then SIGKILL after 5s) before the cluster
// stops, so that another stack can use the same addresses. Idempotent; Cluster.Stop also
// ends them.
func (m *Stack) Stop() { m.procs.stop() }

// workDir makes a fresh directory under the cluster's WorkDir for one stack's data and configs.
func workDir(c *cluster.Cluster, prefix string) (string, error) {
	if err := os.MkdirAll(c.WorkDir(), 0o755); err != nil {
		return "", err
	}
	return os.MkdirTemp(c.WorkDir(), prefix)
}

// writeToken writes the webhook bearer token where the Alertmanager configs'
// credentials_file points.
func writeToken(dir, token string) (string, error) {
	p := filepath.Join(dir, "webhook-token")
	return p, os.WriteFile(p, []byte(token), 0o600)
}
