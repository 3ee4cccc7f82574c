package deploy_test

import (
	"os"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"sigs.k8s.io/yaml"

	"github.com/emptydir-guard/emptydir-guard/remediator"
)

// TestAlertmanagerWebhookTimeout: the example's webhook timeout lets the remediator answer
// one alert at its slowest (--web.alert-timeout, which holds the live re-check), and is
// shorter than the route's group_interval, which bounds every notification anyway.
func TestAlertmanagerWebhookTimeout(t *testing.T) {
	b, err := os.ReadFile("alertmanager/alertmanager.yml")
	if err != nil {
		t.Fatal(err)
	}
	type route struct {
		Receiver      string  `json:"receiver"`
		GroupInterval string  `json:"group_interval"`
		Routes        []route `json:"routes"`
	}
	var cfg struct {
		Route     route `json:"route"`
		Receivers []struct {
			Name           string           `json:"name"`
			WebhookConfigs []map[string]any `json:"webhook_configs"`
		} `json:"receivers"`
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	parse := func(what string, v any) time.Duration {
		t.Helper()
		s, _ := v.(string)
		d, err := model.ParseDuration(s)
		if err != nil {
			t.Fatalf("%s %q: %v", what, s, err)
		}
		return time.Duration(d)
	}
	var groupInterval time.Duration
	for _, r := range cfg.Route.Routes {
		if r.Receiver == "emptydir-remediator" {
			groupInterval = parse("group_interval", r.GroupInterval)
		}
	}
	alertTimeout := remediator.DefaultConfig().AlertTimeout
	hooks := 0
	for _, r := range cfg.Receivers {
		if r.Name != "emptydir-remediator" {
			continue
		}
		for _, w := range r.WebhookConfigs {
			hooks++
			timeout := parse("webhook timeout", w["timeout"])
			if timeout <= alertTimeout || timeout >= groupInterval {
				t.Errorf("webhook timeout %v: want above --web.alert-timeout %v and below group_interval %v", timeout, alertTimeout, groupInterval)
			}
			if _, ok := w["payload"]; ok {
				t.Error("the remediator's webhook sets a payload template: it reads Alertmanager's own body only")
			}
		}
	}
	if hooks == 0 {
		t.Fatal("no webhook of receiver emptydir-remediator")
	}
}
