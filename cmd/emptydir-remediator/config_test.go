package main

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/emptydir-guard/emptydir-guard/internal/cliflag"
)

// parse fills a config from args as the command does.
func parse(t *testing.T, args ...string) *config {
	t.Helper()
	c := defaultConfig()
	if err := cliflag.Parse(newApp(&c), args); err != nil {
		t.Fatalf("parsing %q: %v", args, err)
	}
	return &c
}

// validConfig is what the flags give for a typical deployment.
func validConfig(t *testing.T) *config {
	t.Helper()
	return parse(t, "--exporter.namespace=monitoring")
}

// settings is what parsing decides, without the parser's bookkeeping.
func settings(c *config) []any {
	return []any{c.remediator, c.kube, c.measurement, c.leaderElection, c.ledgerConfigMap}
}

func TestParseFlagsDefaults(t *testing.T) {
	t.Setenv("KUBECONFIG", "")
	c := parse(t)
	// Every flag's default is the value defaultConfig gives: the flags are bound to the field
	// they document and their defaults are taken from it.
	if want := defaultConfig(); !reflect.DeepEqual(settings(c), settings(&want)) {
		t.Errorf("defaults:\n got %+v\nwant %+v", settings(c), settings(&want))
	}
	// The live re-check may take as long as the exporter allows a live walk (30 s) and
	// still fits in the alert's time; freshness does not depend on it.
	if c.measurement.timeout <= 30*time.Second || c.measurement.timeout >= c.remediator.AlertTimeout {
		t.Errorf("--measurement.timeout %s must exceed the exporter's 30 s live bound and stay under --web.alert-timeout %s", c.measurement.timeout, c.remediator.AlertTimeout)
	}
	if c.web == nil || (*c.web.WebListenAddresses)[0] != defaultListenAddress {
		t.Errorf("web flags not registered")
	}
	c = parse(t, "--policy.namespace-deny=kube-system", "--policy.namespace-deny=monitoring", "--web.max-request-size=64KiB",
		"--eviction.dry-run", "--log.level=debug", "--policy.pod-selector=app=web", "--kube-api.qps=7")
	if len(c.remediator.NamespaceDeny) != 2 || c.remediator.MaxRequestBytes != 64<<10 || !c.remediator.DryRun ||
		c.log.Level.String() != "debug" || c.remediator.PodSelector.String() != "app=web" || c.kube.QPS != 7 {
		t.Errorf("parsed: %+v", c)
	}
	// Exemptions granted nowhere, or where an operator's label says so.
	c = parse(t, "--policy.opt-out-namespace-selector=", "--policy.daemonset-namespace-selector=example.com/node-agents=true")
	if c.remediator.OptOutNamespaceSelector != nil || c.remediator.DaemonSetNamespaceSelector.String() != "example.com/node-agents=true" {
		t.Errorf("exemption selectors: %v, %v", c.remediator.OptOutNamespaceSelector, c.remediator.DaemonSetNamespaceSelector)
	}
}

func TestParseRejects(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"unknown source", []string{"--measurement.source=cache"}, "--measurement.source"},
		{"bad pod selector", []string{"--policy.pod-selector==x"}, "--policy.pod-selector"},
		{"bad duration", []string{"--eviction.cooldown=soon"}, "--eviction.cooldown"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := defaultConfig()
			assertErr(t, cliflag.Parse(newApp(&c), tt.args), tt.wantErr)
		})
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		mod     func(*config)
		wantErr string // "" for valid
	}{
		{"defaults with exporter namespace", func(*config) {}, ""},
		{"static exporter URL needs no namespace", func(c *config) {
			c.measurement.exporterNamespace = ""
			c.measurement.exporterURL = "http://127.0.0.1:9809"
		}, ""},
		{"kubelet source needs no exporter", func(c *config) {
			c.measurement.exporterNamespace = ""
			c.measurement.source = "kubelet"
			c.remediator.MaxMeasurementAge = 3 * time.Minute
		}, ""},
		{"no exporter namespace", func(c *config) { c.measurement.exporterNamespace = "" }, "--exporter.namespace"},
		{"relative exporter URL", func(c *config) { c.measurement.exporterURL = "exporter:9809" }, "--exporter.url"},
		{"empty exporter selector", func(c *config) { c.measurement.exporterSelector = " " }, "--exporter.selector"},
		{"bad exporter selector", func(c *config) { c.measurement.exporterSelector = "a in (" }, "--exporter.selector"},
		{"bad port", func(c *config) { c.measurement.exporterPort = 70000 }, "--exporter.port"},
		{"ratio zero", func(c *config) { c.remediator.ThresholdRatio = 0 }, "threshold ratio"},
		{"max age zero", func(c *config) { c.remediator.MaxMeasurementAge = 0 }, "max measurement age"},
		{"webhook path relative", func(c *config) { c.remediator.WebhookPath = "hook" }, "webhook path"},
		{"body limit tiny", func(c *config) { c.remediator.MaxRequestBytes = 10 }, "max request size"},
		{"negative cap", func(c *config) { c.remediator.Caps.Global = -1 }, "caps"},
		{"grace period", func(c *config) { c.remediator.GracePeriodSeconds = -2 }, "--eviction.grace-period"},
		{"measurement timeout beyond alert timeout", func(c *config) { c.measurement.timeout = time.Minute }, "--measurement.timeout"},
		{"API rate limit zero", func(c *config) { c.kube.QPS = 0 }, "--kube-api.qps"},
		{"allowed and denied", func(c *config) {
			c.remediator.NamespaceAllow = []string{"a"}
			c.remediator.NamespaceDeny = []string{"a"}
		}, "both allowed and denied"},
		{"leader election without namespace", func(c *config) { c.remediator.LeaderElection = true; c.leaderElection.Identity = "me" }, "lease namespace"},
		{"leader election ok", func(c *config) {
			c.remediator.LeaderElection = true
			c.leaderElection.Namespace, c.leaderElection.Identity = "ns", "me"
		}, ""},
		{"leader election without a shared ledger", func(c *config) {
			c.remediator.LeaderElection = true
			c.leaderElection.Namespace, c.leaderElection.Identity, c.ledgerConfigMap = "ns", "me", ""
		}, "--ledger.configmap"},
		{"lease shorter than renew", func(c *config) {
			c.remediator.LeaderElection = true
			c.leaderElection.Namespace, c.leaderElection.Identity = "ns", "me"
			c.leaderElection.LeaseDuration = 5 * time.Second
		}, "lease-duration"},
		{"notices from the exporter's ServiceAccount", func(c *config) { c.remediator.Notices.ServiceAccount = "emptydir-guard/emptydir-exporter" }, ""},
		{"notices from no ServiceAccount name", func(c *config) { c.remediator.Notices.ServiceAccount = "emptydir-exporter" }, "notice service account"},
		{"notices with no bucket", func(c *config) {
			c.remediator.Notices.ServiceAccount, c.remediator.Notices.PerNamespace = "emptydir-guard/emptydir-exporter", 0
		}, "notices per namespace"},
		{"several problems reported at once", func(c *config) { c.remediator.ThresholdRatio = -1; c.measurement.exporterPort = 0 }, "--exporter.port"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validConfig(t)
			tt.mod(c)
			assertErr(t, validate(c), tt.wantErr)
		})
	}
}

func assertErr(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("unexpected error: %v", err)
	case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
		t.Fatalf("error %v, want one containing %q", err, want)
	}
}
