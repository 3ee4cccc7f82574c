package monitoring

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"sync"
	"time"

	"sigs.k8s.io/yaml"
)

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

// PrometheusConfig generates the scrape and alerting configuration: scrape and evaluation
// interval, the jobs of docs/deploy.md's plain Prometheus with static targets (the exporters'
// trigger series in emptydir-exporter, their others in emptydir-exporter-slow, here at the
// same interval so that no test waits longer for them; emptydir-remediator), the rule files,
// and the Alertmanager.
func PrometheusConfig(interval time.Duration, ruleFiles []string, alertmanagerAddr string, exporters, remediators []string) ([]byte, error) {
	iv := promDuration(interval)
	job := func(name string, targets []string, params map[string][]string) map[string]any {
		if targets == nil {
			targets = []string{}
		}
		j := map[string]any{
			"job_name":        name,
			"scrape_interval": iv,
			"scrape_timeout":  promDuration(interval * 4 / 5),
			"static_configs":  []any{map[string]any{"targets": targets}},
		}
		if params != nil {
			j["params"] = params
		}
		return j
	}
	cfg := map[string]any{
		"global": map[string]any{
			"scrape_interval":     iv,
			"evaluation_interval": iv,
			"scrape_timeout":      promDuration(interval * 4 / 5),
		},
		"rule_files": ruleFiles,
		"alerting": map[string]any{
			"alertmanagers": []any{map[string]any{
				"static_configs": []any{map[string]any{"targets": []string{alertmanagerAddr}}},
			}},
		},
		"scrape_configs": []any{
			job("emptydir-exporter", exporters, map[string][]string{"collect[]": {"trigger"}}),
			job("emptydir-exporter-slow", exporters, map[string][]string{"exclude[]": {"trigger"}}),
			job("emptydir-remediator", remediators, nil),
		},
	}
	return yaml.Marshal(cfg)
}

// promDuration formats a duration the way Prometheus configs want it (e.g. "5s", "1500ms").
func promDuration(d time.Duration) string {
	if d%time.Second == 0 {
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	}
	return strconv.FormatInt(int64(d/time.Millisecond), 10) + "ms"
}

const remediatorReceiver = "emptydir-remediator"

// AlertmanagerConfig derives a test configuration for the Alertmanager binary bin from base
// (an Alertmanager YAML, normally deploy/alertmanager/alertmanager.yml; empty: a generated one
// with the same route): the webhooks of receiver "emptydir-remediator" post to webhookURL with
// the bearer token in tokenFile, and the routes to that receiver use the given timers.
func AlertmanagerConfig(bin, base, webhookURL, tokenFile string, groupWait, groupInterval, repeatInterval time.Duration) ([]byte, error) {
	timeoutOK, err := webhookTimeoutSupported(bin)
	if err != nil {
		return nil, err
	}
	var cfg map[string]any
	if base == "" {
		cfg = map[string]any{
			"route": map[string]any{
				"receiver": "human",
				"group_by": []any{"alertname", "namespace"},
				"routes": []any{map[string]any{
					"receiver": remediatorReceiver,
					"matchers": []any{`remediation="evict"`},
					"group_by": []any{"namespace", "pod", "uid", "check", "volume", "container"},
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
			r["group_wait"] = promDuration(groupWait)
			r["group_interval"] = promDuration(groupInterval)
			r["repeat_interval"] = promDuration(repeatInterval)
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
			// The example's webhook timeout needs Alertmanager >= 0.28; older ones (Debian's
			// 0.25) refuse the whole file. deploy's tests check the shipped value.
			if !timeoutOK {
				delete(wm, "timeout")
			}
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

var (
	amVersionRe = regexp.MustCompile(`version (\d+)\.(\d+)\.`)
	amVersions  sync.Map // bin → webhook timeout supported (bool)
)

// webhookTimeoutSupported reports whether the Alertmanager bin (its --version) knows the
// webhook `timeout` field, added in 0.28.
func webhookTimeoutSupported(bin string) (bool, error) {
	if v, ok := amVersions.Load(bin); ok {
		return v.(bool), nil
	}
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		return false, fmt.Errorf("%s --version: %w\n%s", bin, err, out)
	}
	m := amVersionRe.FindSubmatch(out)
	if m == nil {
		return false, fmt.Errorf("%s --version: no version in %q", bin, out)
	}
	major, _ := strconv.Atoi(string(m[1]))
	minor, _ := strconv.Atoi(string(m[2]))
	ok := major > 0 || minor >= 28
	amVersions.Store(bin, ok)
	return ok, nil
}
