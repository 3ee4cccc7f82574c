package main

import (
	"strings"
	"testing"
	"time"

	promconfig "github.com/prometheus/common/config"
	"k8s.io/client-go/rest"
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
	// The live re-check may take as long as the exporter allows a live walk (30 s) and
	// still fits in the alert's time; freshness does not depend on it.
	if c.measureTimeout <= 30*time.Second || c.measureTimeout >= c.alertTimeout {
		t.Errorf("--measurement.timeout %s must exceed the exporter's 30 s live bound and stay under --web.alert-timeout %s", c.measureTimeout, c.alertTimeout)
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

// Credentials towards the exporter or the API server never go over plain http.
func TestCredentialsNeverOverPlainHTTP(t *testing.T) {
	bearer := promconfig.HTTPClientConfig{Authorization: &promconfig.Authorization{Type: "Bearer", CredentialsFile: "/etc/token"}}
	basic := promconfig.HTTPClientConfig{BasicAuth: &promconfig.BasicAuth{Username: "u", Password: "p"}}
	header := promconfig.HTTPClientConfig{HTTPHeaders: &promconfig.Headers{Headers: map[string]promconfig.Header{"authorization": {Values: []string{"Bearer x"}}}}}
	tests := []struct {
		name    string
		mod     func(*config)
		hc      promconfig.HTTPClientConfig
		wantErr string
	}{
		{"discovered over http, no credentials", func(*config) {}, promconfig.HTTPClientConfig{}, ""},
		{"discovered over http with a bearer token", func(*config) {}, bearer, "--exporter.scheme=http"},
		{"discovered over https with a bearer token", func(c *config) { c.exporterScheme = "https" }, bearer, ""},
		{"static http URL with basic auth", func(c *config) { c.exporterURL = "http://10.0.0.1:9731" }, basic, "--exporter.url=http://10.0.0.1:9731"},
		{"static http URL with an Authorization header", func(c *config) { c.exporterURL = "http://10.0.0.1:9731" }, header, "Authorization header"},
		{"static https URL with a bearer token", func(c *config) { c.exporterURL = "https://10.0.0.1:9731" }, bearer, ""},
		{"static http URL wins over the scheme flag", func(c *config) { c.exporterScheme = "https"; c.exporterURL = "http://e:9731" }, bearer, "clear text"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validConfig(t)
			tt.mod(c)
			assertErr(t, checkExporterCredentials(c, tt.hc), tt.wantErr)
		})
	}

	kubelet := []struct {
		name    string
		cfg     rest.Config
		wantErr string
	}{
		{"https with a token", rest.Config{Host: "https://10.0.0.1:6443", BearerToken: "t"}, ""},
		{"http without credentials (kubectl proxy)", rest.Config{Host: "http://127.0.0.1:8001"}, ""},
		{"http with a token", rest.Config{Host: "http://10.0.0.1:8080", BearerToken: "t"}, "plain http"},
		{"http with a token file", rest.Config{Host: "http://10.0.0.1:8080", BearerTokenFile: "/t"}, "plain http"},
		{"http with a password", rest.Config{Host: "http://10.0.0.1:8080", Username: "u", Password: "p"}, "plain http"},
	}
	for _, tt := range kubelet {
		t.Run("kubelet source: "+tt.name, func(t *testing.T) {
			assertErr(t, checkKubeletCredentials(&tt.cfg), tt.wantErr)
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
