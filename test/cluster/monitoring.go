package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"sigs.k8s.io/yaml"
)

// Default binaries of the Debian prometheus and prometheus-alertmanager packages.
const (
	DefaultPrometheusBin   = "/usr/bin/prometheus"
	DefaultAlertmanagerBin = "/usr/bin/prometheus-alertmanager"
)

// MonitoringOptions configures StartMonitoring: a real Prometheus and Alertmanager inside the
// cluster's network namespace, wired like a production install of emptyDir guard.
type MonitoringOptions struct {
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

// Monitoring is a running Prometheus + Alertmanager pair inside a cluster's namespace. Both
// processes are tracked by the cluster (StartProcess), so Cluster.Stop ends them.
type Monitoring struct {
	c                *Cluster
	client           *http.Client
	procs            []*exec.Cmd
	PrometheusAddr   string
	AlertmanagerAddr string
	// PrometheusConfigFile and AlertmanagerConfigFile are the generated configurations.
	PrometheusConfigFile, AlertmanagerConfigFile string
}

// PrometheusURL is the base URL of Prometheus, reachable inside the namespace (and from the
// test process through HTTPClient).
func (m *Monitoring) PrometheusURL() string { return "http://" + m.PrometheusAddr }

// AlertmanagerURL is the base URL of Alertmanager inside the namespace.
func (m *Monitoring) AlertmanagerURL() string { return "http://" + m.AlertmanagerAddr }

// defaultRouteTimings fills the remediator route's timings left zero: 1s, 5s, 10s, short
// enough for tests to see a delivery and its retries.
func defaultRouteTimings(groupWait, groupInterval, repeatInterval *time.Duration) {
	if *groupWait == 0 {
		*groupWait = time.Second
	}
	if *groupInterval == 0 {
		*groupInterval = 5 * time.Second
	}
	if *repeatInterval == 0 {
		*repeatInterval = 10 * time.Second
	}
}

// StartMonitoring starts Prometheus and Alertmanager inside the cluster's namespace with
// generated configurations (data and configs under WorkDir/monitoring) and waits until both
// answer ready.
func (c *Cluster) StartMonitoring(ctx context.Context, o MonitoringOptions) (*Monitoring, error) {
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

	// A fresh folder per call: a cluster may run several stacks one after the other.
	if err := os.MkdirAll(c.workDir, 0o755); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(c.workDir, "monitoring-")
	if err != nil {
		return nil, err
	}
	for _, d := range []string{filepath.Join(dir, "prometheus-data"), filepath.Join(dir, "alertmanager-data")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	m := &Monitoring{c: c, client: c.HTTPClient(nil), PrometheusAddr: o.PrometheusAddr, AlertmanagerAddr: o.AlertmanagerAddr,
		PrometheusConfigFile: filepath.Join(dir, "prometheus.yml"), AlertmanagerConfigFile: filepath.Join(dir, "alertmanager.yml")}

	// Alertmanager.
	tokenFile := filepath.Join(dir, "webhook-token")
	if err := os.WriteFile(tokenFile, []byte(o.WebhookToken), 0o600); err != nil {
		return nil, err
	}
	amCfg, err := AlertmanagerConfig(o.AlertmanagerConfig, o.WebhookURL, tokenFile, o.GroupWait, o.GroupInterval, o.RepeatInterval)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(m.AlertmanagerConfigFile, amCfg, 0o644); err != nil {
		return nil, err
	}
	am := c.Command(context.Background(), o.AlertmanagerBin,
		"--config.file="+m.AlertmanagerConfigFile,
		"--storage.path="+filepath.Join(dir, "alertmanager-data"),
		"--web.listen-address="+o.AlertmanagerAddr,
		"--web.external-url=http://"+o.AlertmanagerAddr+"/",
		"--cluster.listen-address=", // no HA gossip: nothing to peer with, and no fixed port
		"--log.level=debug")
	if err := c.StartProcess("alertmanager", am); err != nil {
		return nil, err
	}
	m.procs = append(m.procs, am)

	// Prometheus.
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
	prom := c.Command(context.Background(), o.PrometheusBin,
		"--config.file="+m.PrometheusConfigFile,
		"--storage.tsdb.path="+filepath.Join(dir, "prometheus-data"),
		"--web.listen-address="+o.PrometheusAddr,
		"--web.external-url=http://"+o.PrometheusAddr+"/")
	if err := c.StartProcess("prometheus", prom); err != nil {
		m.Stop()
		return nil, err
	}
	m.procs = append(m.procs, prom)

	wctx, cancel := context.WithTimeout(ctx, o.ReadyTimeout)
	defer cancel()
	for _, w := range []struct{ name, url string }{
		{"prometheus", m.PrometheusURL() + "/-/ready"},
		{"alertmanager", m.AlertmanagerURL() + "/-/ready"},
	} {
		if err := m.waitReady(wctx, w.url); err != nil {
			m.Stop()
			return nil, fmt.Errorf("%s not ready: %w\n%s", w.name, err, tailFile(c.LogPath(w.name), 3000))
		}
	}
	c.logf("prometheus at %s, alertmanager at %s (inside %s)", m.PrometheusURL(), m.AlertmanagerURL(), c.netnsPath)
	return m, nil
}

// Stop ends Prometheus and Alertmanager (SIGTERM, then SIGKILL after 5s) before the cluster
// stops, so that another stack can use the same addresses. Idempotent; Cluster.Stop also
// ends them.
func (m *Monitoring) Stop() {
	for _, cmd := range m.procs {
		if cmd.Process == nil {
			continue
		}
		pid := cmd.Process.Pid
		_ = syscall.Kill(-pid, syscall.SIGTERM)
		deadline := time.Now().Add(5 * time.Second)
		// The harness reaps the process; once it has, the pid no longer exists.
		for syscall.Kill(pid, 0) == nil && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		if syscall.Kill(pid, 0) == nil {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
	}
	m.procs = nil
}

func (m *Monitoring) waitReady(ctx context.Context, u string) error {
	var last error
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		resp, err := m.client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("GET %s: %s", u, resp.Status)
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %w)", ctx.Err(), last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// PrometheusConfig generates the scrape and alerting configuration: scrape and evaluation
// interval, jobs emptydir-exporter and emptydir-remediator with static targets, the rule
// files, and the Alertmanager.
func PrometheusConfig(interval time.Duration, ruleFiles []string, alertmanagerAddr string, exporters, remediators []string) ([]byte, error) {
	iv := model(interval)
	job := func(name string, targets []string) map[string]any {
		if targets == nil {
			targets = []string{}
		}
		return map[string]any{
			"job_name":        name,
			"scrape_interval": iv,
			"scrape_timeout":  model(interval * 4 / 5),
			"static_configs":  []any{map[string]any{"targets": targets}},
		}
	}
	cfg := map[string]any{
		"global": map[string]any{
			"scrape_interval":     iv,
			"evaluation_interval": iv,
			"scrape_timeout":      model(interval * 4 / 5),
		},
		"rule_files": ruleFiles,
		"alerting": map[string]any{
			"alertmanagers": []any{map[string]any{
				"static_configs": []any{map[string]any{"targets": []string{alertmanagerAddr}}},
			}},
		},
		"scrape_configs": []any{job("emptydir-exporter", exporters), job("emptydir-remediator", remediators)},
	}
	return yaml.Marshal(cfg)
}

// model formats a duration the way Prometheus configs want it (e.g. "5s", "1500ms").
func model(d time.Duration) string {
	if d%time.Second == 0 {
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	}
	return strconv.FormatInt(int64(d/time.Millisecond), 10) + "ms"
}

const remediatorReceiver = "emptydir-remediator"

// AlertmanagerConfig derives a test configuration from base (an Alertmanager YAML, normally
// deploy/alertmanager/alertmanager.yml; empty: a generated one with the same route): the
// webhooks of receiver "emptydir-remediator" post to webhookURL with the bearer token in
// tokenFile, and the routes to that receiver use the given timers.
func AlertmanagerConfig(base, webhookURL, tokenFile string, groupWait, groupInterval, repeatInterval time.Duration) ([]byte, error) {
	var cfg map[string]any
	if base == "" {
		cfg = map[string]any{
			"route": map[string]any{
				"receiver": "human",
				"group_by": []any{"alertname", "namespace"},
				"routes": []any{map[string]any{
					"receiver": remediatorReceiver,
					"matchers": []any{`remediation="evict"`},
					"group_by": []any{"namespace", "pod", "uid", "volume"},
					"continue": true,
				}, map[string]any{"receiver": "human"}},
			},
			"receivers": []any{
				map[string]any{"name": remediatorReceiver, "webhook_configs": []any{map[string]any{"send_resolved": false}}},
				map[string]any{"name": "human"},
			},
		}
	} else {
		b, err := os.ReadFile(base)
		if err != nil {
			return nil, fmt.Errorf("alertmanager config: %w", err)
		}
		if err := yaml.Unmarshal(b, &cfg); err != nil {
			return nil, fmt.Errorf("alertmanager config %s: %w", base, err)
		}
	}
	// Routes to the remediator: short timers, so the test measures the pipeline, not the wait.
	found := 0
	var walk func(r map[string]any)
	walk = func(r map[string]any) {
		if r["receiver"] == remediatorReceiver {
			found++
			r["group_wait"] = model(groupWait)
			r["group_interval"] = model(groupInterval)
			r["repeat_interval"] = model(repeatInterval)
		}
		subs, _ := r["routes"].([]any)
		for _, s := range subs {
			if sr, ok := s.(map[string]any); ok {
				walk(sr)
			}
		}
	}
	root, ok := cfg["route"].(map[string]any)
	if !ok {
		return nil, errors.New("alertmanager config: no route")
	}
	walk(root)
	if found == 0 {
		return nil, fmt.Errorf("alertmanager config: no route to receiver %q", remediatorReceiver)
	}
	hooks := 0
	recvs, _ := cfg["receivers"].([]any)
	for _, r := range recvs {
		rm, ok := r.(map[string]any)
		if !ok || rm["name"] != remediatorReceiver {
			continue
		}
		whs, _ := rm["webhook_configs"].([]any)
		for _, w := range whs {
			wm, ok := w.(map[string]any)
			if !ok {
				continue
			}
			wm["url"] = webhookURL
			wm["http_config"] = map[string]any{
				"authorization": map[string]any{"type": "Bearer", "credentials_file": tokenFile},
			}
			hooks++
		}
	}
	if hooks == 0 {
		return nil, fmt.Errorf("alertmanager config: receiver %q has no webhook_configs", remediatorReceiver)
	}
	return yaml.Marshal(cfg)
}

// Sample is one series of an instant or range query result.
type Sample struct {
	Metric map[string]string
	// Value is the instant value (vector results); Values the points of a matrix result.
	Value  float64
	Time   time.Time
	Values []Point
}

// Point is one sample of a range result.
type Point struct {
	Time  time.Time
	Value float64
}

type promResponse struct {
	Status    string `json:"status"`
	ErrorType string `json:"errorType"`
	Error     string `json:"error"`
	Data      struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	} `json:"data"`
}

// Query runs an instant query (/api/v1/query) now. Scalar results come back as one sample
// without labels.
func (m *Monitoring) Query(ctx context.Context, expr string) ([]Sample, error) {
	return m.query(ctx, "/api/v1/query", url.Values{"query": {expr}})
}

// QueryRange runs /api/v1/query_range.
func (m *Monitoring) QueryRange(ctx context.Context, expr string, start, end time.Time, step time.Duration) ([]Sample, error) {
	return m.query(ctx, "/api/v1/query_range", url.Values{"query": {expr},
		"start": {unixString(start)}, "end": {unixString(end)}, "step": {strconv.FormatFloat(step.Seconds(), 'f', -1, 64)}})
}

func unixString(t time.Time) string {
	return strconv.FormatFloat(float64(t.UnixNano())/1e9, 'f', 3, 64)
}

func (m *Monitoring) query(ctx context.Context, path string, params url.Values) ([]Sample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.PrometheusURL()+path, strings.NewReader(params.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := m.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	var pr promResponse
	if err := json.Unmarshal(body, &pr); err != nil {
		return nil, fmt.Errorf("%s %q: %s: %s", path, params.Get("query"), resp.Status, body)
	}
	if pr.Status != "success" {
		return nil, fmt.Errorf("%s %q: %s: %s", path, params.Get("query"), pr.ErrorType, pr.Error)
	}
	return parseResult(pr.Data.ResultType, pr.Data.Result)
}

func parseResult(typ string, raw json.RawMessage) ([]Sample, error) {
	switch typ {
	case "vector":
		var v []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		}
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, err
		}
		out := make([]Sample, 0, len(v))
		for _, s := range v {
			p, err := parsePoint(s.Value)
			if err != nil {
				return nil, err
			}
			out = append(out, Sample{Metric: s.Metric, Value: p.Value, Time: p.Time})
		}
		return out, nil
	case "matrix":
		var mx []struct {
			Metric map[string]string `json:"metric"`
			Values [][2]any          `json:"values"`
		}
		if err := json.Unmarshal(raw, &mx); err != nil {
			return nil, err
		}
		out := make([]Sample, 0, len(mx))
		for _, s := range mx {
			smp := Sample{Metric: s.Metric}
			for _, v := range s.Values {
				p, err := parsePoint(v)
				if err != nil {
					return nil, err
				}
				smp.Values = append(smp.Values, p)
			}
			if n := len(smp.Values); n > 0 {
				smp.Value, smp.Time = smp.Values[n-1].Value, smp.Values[n-1].Time
			}
			out = append(out, smp)
		}
		return out, nil
	case "scalar":
		var v [2]any
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, err
		}
		p, err := parsePoint(v)
		if err != nil {
			return nil, err
		}
		return []Sample{{Metric: map[string]string{}, Value: p.Value, Time: p.Time}}, nil
	default:
		return nil, fmt.Errorf("unsupported result type %q", typ)
	}
}

func parsePoint(v [2]any) (Point, error) {
	ts, ok := v[0].(float64)
	if !ok {
		return Point{}, fmt.Errorf("bad sample time %v", v[0])
	}
	s, ok := v[1].(string)
	if !ok {
		return Point{}, fmt.Errorf("bad sample value %v", v[1])
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return Point{}, err
	}
	sec := int64(ts)
	return Point{Time: time.Unix(sec, int64((ts-float64(sec))*1e9)).Round(time.Millisecond), Value: f}, nil
}

// RuleAlert is an alert as Prometheus' /api/v1/alerts shows it.
type RuleAlert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	State       string            `json:"state"`
	ActiveAt    time.Time         `json:"activeAt"`
	Value       string            `json:"value"`
}

// PrometheusAlerts returns the pending and firing alerts of Prometheus' rules.
func (m *Monitoring) PrometheusAlerts(ctx context.Context) ([]RuleAlert, error) {
	var out struct {
		Status string `json:"status"`
		Data   struct {
			Alerts []RuleAlert `json:"alerts"`
		} `json:"data"`
	}
	if err := m.getJSON(ctx, m.PrometheusURL()+"/api/v1/alerts", &out); err != nil {
		return nil, err
	}
	return out.Data.Alerts, nil
}

// AMAlert is an alert as Alertmanager's /api/v2/alerts shows it.
type AMAlert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	StartsAt    time.Time         `json:"startsAt"`
	UpdatedAt   time.Time         `json:"updatedAt"`
	EndsAt      time.Time         `json:"endsAt"`
	Status      struct {
		State string `json:"state"`
	} `json:"status"`
	Receivers []struct {
		Name string `json:"name"`
	} `json:"receivers"`
}

// AlertmanagerAlerts returns Alertmanager's alerts (/api/v2/alerts), optionally filtered by
// matchers such as `alertname="EmptyDirOverLimit"`.
func (m *Monitoring) AlertmanagerAlerts(ctx context.Context, matchers ...string) ([]AMAlert, error) {
	q := url.Values{}
	for _, f := range matchers {
		q.Add("filter", f)
	}
	u := m.AlertmanagerURL() + "/api/v2/alerts"
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	var out []AMAlert
	if err := m.getJSON(ctx, u, &out); err != nil {
		return nil, err
	}
	return out, nil
}

func (m *Monitoring) getJSON(ctx context.Context, u string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := m.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", u, resp.Status, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("GET %s: %w", u, err)
	}
	return nil
}

// Listen opens a listening socket inside the cluster's network namespace, so that test code
// can serve processes that run there (e.g. a recording proxy in front of a webhook).
// Accepted connections belong to that namespace whatever thread serves them.
func (c *Cluster) Listen(network, addr string) (net.Listener, error) {
	var l net.Listener
	var listenErr error
	if err := inNetns(c.netnsPath, func() { l, listenErr = net.Listen(network, addr) }); err != nil {
		return nil, err
	}
	return l, listenErr
}
