package monitoring

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// The generated configurations must be what promtool and amtool accept, and must keep the
// project's route (deploy/alertmanager/alertmanager.yml) with the test's timers and webhook.

func TestAlertmanagerConfigFromProjectExample(t *testing.T) {
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("s3cret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(DefaultAlertmanagerBin); err != nil {
		t.Skipf("%s missing: its version decides the webhook timeout", DefaultAlertmanagerBin)
	}
	for _, base := range []string{"../../deploy/alertmanager/alertmanager.yml", ""} {
		b, err := AlertmanagerConfig(DefaultAlertmanagerBin, base, "http://127.0.0.1:19802/webhook", token, time.Second, 5*time.Second, 10*time.Second)
		if err != nil {
			t.Fatalf("base %q: %v", base, err)
		}
		var cfg struct {
			Route struct {
				Routes []struct {
					Receiver       string   `json:"receiver"`
					Matchers       []string `json:"matchers"`
					GroupBy        []string `json:"group_by"`
					GroupWait      string   `json:"group_wait"`
					GroupInterval  string   `json:"group_interval"`
					RepeatInterval string   `json:"repeat_interval"`
				} `json:"routes"`
			} `json:"route"`
			Receivers []struct {
				Name           string `json:"name"`
				WebhookConfigs []struct {
					URL        string `json:"url"`
					HTTPConfig struct {
						Authorization struct {
							Type            string `json:"type"`
							CredentialsFile string `json:"credentials_file"`
						} `json:"authorization"`
					} `json:"http_config"`
				} `json:"webhook_configs"`
			} `json:"receivers"`
		}
		if err := yaml.Unmarshal(b, &cfg); err != nil {
			t.Fatal(err)
		}
		r := cfg.Route.Routes[0]
		if r.Receiver != "emptydir-remediator" || r.GroupWait != "1s" || r.GroupInterval != "5s" || r.RepeatInterval != "10s" ||
			strings.Join(r.GroupBy, ",") != "namespace,pod,uid,check,volume,container" || strings.Join(r.Matchers, ",") != `remediation="evict"` {
			t.Errorf("base %q: remediator route %+v", base, r)
		}
		var hooks int
		for _, rc := range cfg.Receivers {
			if rc.Name != "emptydir-remediator" {
				continue
			}
			for _, w := range rc.WebhookConfigs {
				hooks++
				if w.URL != "http://127.0.0.1:19802/webhook" || w.HTTPConfig.Authorization.Type != "Bearer" ||
					w.HTTPConfig.Authorization.CredentialsFile != token {
					t.Errorf("base %q: webhook %+v", base, w)
				}
			}
		}
		if hooks != 1 {
			t.Errorf("base %q: %d remediator webhooks, want 1", base, hooks)
		}
		amtool := filepath.Join(filepath.Dir(DefaultAlertmanagerBin), "amtool")
		if _, err := os.Stat(amtool); err != nil {
			continue
		}
		p := filepath.Join(dir, "am.yml")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(amtool, "check-config", p).CombinedOutput(); err != nil {
			t.Errorf("amtool check-config (base %q): %v\n%s\n%s", base, err, out, b)
		}
	}
}

func TestPrometheusConfig(t *testing.T) {
	rules, err := filepath.Abs("../../rules/emptydir-guard.rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	b, err := PrometheusConfig(5*time.Second, []string{rules}, "127.0.0.1:19093", []string{"127.0.0.1:19801"}, []string{"127.0.0.1:19802", "127.0.0.1:19803"})
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	js, _ := json.Marshal(cfg)
	for _, want := range []string{`"evaluation_interval":"5s"`, `"scrape_interval":"5s"`, `"job_name":"emptydir-exporter"`,
		`"params":{"collect[]":["trigger"]}`, `"job_name":"emptydir-exporter-slow"`, `"params":{"exclude[]":["trigger"]}`,
		`"job_name":"emptydir-remediator"`, `"targets":["127.0.0.1:19802","127.0.0.1:19803"]`, `"targets":["127.0.0.1:19093"]`} {
		if !strings.Contains(string(js), want) {
			t.Errorf("config lacks %s:\n%s", want, b)
		}
	}
	promtool := filepath.Join(filepath.Dir(DefaultPrometheusBin), "promtool")
	if _, err := os.Stat(promtool); err != nil {
		t.Skipf("%s missing: config not checked by promtool", promtool)
	}
	p := filepath.Join(t.TempDir(), "prometheus.yml")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "config", p).CombinedOutput(); err != nil {
		t.Errorf("promtool check config: %v\n%s\n%s", err, out, b)
	}
}

func TestPromDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{time.Second: "1s", 5 * time.Second: "5s", 4 * time.Second: "4s", 1500 * time.Millisecond: "1500ms"} {
		if got := promDuration(d); got != want {
			t.Errorf("promDuration(%s) = %s, want %s", d, got, want)
		}
	}
}

// The shipped example's webhook timeout reaches the Alertmanagers that know the field (0.28
// and later) and is left out for older ones, which would refuse the whole file.
func TestAlertmanagerConfigWebhookTimeout(t *testing.T) {
	amVersions.Store("fake-alertmanager-0.25", false)
	amVersions.Store("fake-alertmanager-0.28", true)
	for bin, want := range map[string]string{"fake-alertmanager-0.25": "", "fake-alertmanager-0.28": "50s"} {
		b, err := AlertmanagerConfig(bin, "../../deploy/alertmanager/alertmanager.yml", "http://127.0.0.1:19802/webhook", "/token", time.Second, 5*time.Second, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var cfg struct {
			Receivers []struct {
				Name           string `json:"name"`
				WebhookConfigs []struct {
					Timeout string `json:"timeout"`
				} `json:"webhook_configs"`
			} `json:"receivers"`
		}
		if err := yaml.Unmarshal(b, &cfg); err != nil {
			t.Fatal(err)
		}
		for _, r := range cfg.Receivers {
			if r.Name == "emptydir-remediator" && (len(r.WebhookConfigs) != 1 || r.WebhookConfigs[0].Timeout != want) {
				t.Errorf("%s: remediator webhooks %+v, want timeout %q", bin, r.WebhookConfigs, want)
			}
		}
	}
	if v, err := webhookTimeoutSupported(DefaultAlertmanagerBin); err == nil {
		t.Logf("%s: webhook timeout supported: %v", DefaultAlertmanagerBin, v)
	}
}
