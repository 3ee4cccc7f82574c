package main

import (
	"strings"
	"testing"
	"time"
)

// validConfig is what parseFlags gives for a typical deployment.
func validConfig(t *testing.T) *config {
	t.Helper()
	c, _, _, err := parseFlags([]string{"--exporter.namespace=monitoring"})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestParseFlagsDefaults(t *testing.T) {
	c, logCfg, webFlags, err := parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.webhookPath != "/webhook" || c.maxRequestBytes != 1<<20 || c.thresholdRatio != 1 || c.maxAge != 5*time.Second ||
		c.source != "exporter" || c.dryRun || c.leaderElect || c.gracePeriod != -1 || c.optOutAnnotation != "emptydir-guard.io/evict" {
		t.Errorf("defaults: %+v", c)
	}
	if logCfg == nil || webFlags == nil || (*webFlags.WebListenAddresses)[0] != defaultListenAddress {
		t.Errorf("log/web flags not registered")
	}
	c, _, _, err = parseFlags([]string{"--namespace-deny=kube-system", "--namespace-deny=monitoring", "--web.max-request-size=64KiB", "--dry-run", "--log.level=debug"})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.namespaceDeny) != 2 || c.maxRequestBytes != 64<<10 || !c.dryRun {
		t.Errorf("parsed: %+v", c)
	}
	if _, _, _, err := parseFlags([]string{"--measurement.source=cache"}); err == nil {
		t.Error("unknown source accepted")
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		mod     func(*config)
		wantErr string // "" for valid
	}{
		{"defaults with exporter namespace", func(*config) {}, ""},
		{"static exporter URL needs no namespace", func(c *config) { c.exporterNS = ""; c.exporterURL = "http://127.0.0.1:9809" }, ""},
		{"kubelet source needs no exporter", func(c *config) { c.exporterNS = ""; c.source = "kubelet"; c.maxAge = 3 * time.Minute }, ""},
		{"no exporter namespace", func(c *config) { c.exporterNS = "" }, "--exporter.namespace"},
		{"relative exporter URL", func(c *config) { c.exporterURL = "exporter:9809" }, "--exporter.url"},
		{"empty exporter selector", func(c *config) { c.exporterSelector = " " }, "--exporter.selector"},
		{"bad exporter selector", func(c *config) { c.exporterSelector = "a in (" }, "--exporter.selector"},
		{"bad port", func(c *config) { c.exporterPort = 70000 }, "--exporter.port"},
		{"bad pod selector", func(c *config) { c.podSelector = "=x" }, "--pod-selector"},
		{"ratio zero", func(c *config) { c.thresholdRatio = 0 }, "threshold ratio"},
		{"max age zero", func(c *config) { c.maxAge = 0 }, "max measurement age"},
		{"webhook path relative", func(c *config) { c.webhookPath = "hook" }, "webhook path"},
		{"body limit tiny", func(c *config) { c.maxRequestBytes = 10 }, "max request size"},
		{"negative cap", func(c *config) { c.maxGlobal = -1 }, "caps"},
		{"grace period", func(c *config) { c.gracePeriod = -2 }, "--eviction.grace-period"},
		{"measurement timeout beyond alert timeout", func(c *config) { c.measureTimeout = time.Minute }, "--measurement.timeout"},
		{"allowed and denied", func(c *config) { c.namespaceAllow = []string{"a"}; c.namespaceDeny = []string{"a"} }, "both allowed and denied"},
		{"leader election without namespace", func(c *config) { c.leaderElect = true; c.leaseIdentity = "me" }, "lease namespace"},
		{"leader election ok", func(c *config) { c.leaderElect = true; c.leaseNamespace = "ns"; c.leaseIdentity = "me" }, ""},
		{"leader election without a shared ledger", func(c *config) {
			c.leaderElect, c.leaseNamespace, c.leaseIdentity, c.ledgerConfigMap = true, "ns", "me", ""
		}, "--ledger.configmap"},
		{"lease shorter than renew", func(c *config) {
			c.leaderElect, c.leaseNamespace, c.leaseIdentity = true, "ns", "me"
			c.leaseDuration = 5 * time.Second
		}, "lease-duration"},
		{"several problems reported at once", func(c *config) { c.thresholdRatio = -1; c.exporterPort = 0 }, "--exporter.port"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validConfig(t)
			tt.mod(c)
			err := validate(c)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}
