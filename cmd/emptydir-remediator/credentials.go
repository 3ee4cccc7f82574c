package main

import (
	"bytes"
	"fmt"
	"net/url"
	"os"
	"strings"

	promconfig "github.com/prometheus/common/config"
	"k8s.io/client-go/rest"
)

// checkExporterCredentials refuses to send the credentials of --exporter.http-config.file
// (read after validate) to the exporter over plain http, where any host on the path reads them.
func checkExporterCredentials(m measurementConfig, hc promconfig.HTTPClientConfig) error {
	scheme, flag := m.exporterScheme, "--exporter.scheme=http"
	if m.exporterURL != "" {
		u, err := url.Parse(m.exporterURL)
		if err != nil {
			return fmt.Errorf("--exporter.url %q: %w", m.exporterURL, err)
		}
		scheme, flag = u.Scheme, fmt.Sprintf("--exporter.url=%s", m.exporterURL)
	}
	if scheme != "http" {
		return nil
	}
	if what := httpConfigCredentials(hc); what != "" {
		return fmt.Errorf("%s would send the %s of --exporter.http-config.file in clear text; use https", flag, what)
	}
	return nil
}

// httpConfigCredentials names the credentials a Prometheus HTTP client configuration sends,
// "" for none.
func httpConfigCredentials(hc promconfig.HTTPClientConfig) string {
	switch {
	case hc.Authorization != nil || hc.BearerToken != "" || hc.BearerTokenFile != "":
		return "authorization (bearer token)"
	case hc.BasicAuth != nil:
		return "basic auth password"
	case hc.OAuth2 != nil:
		return "OAuth2 token"
	}
	if hc.HTTPHeaders != nil {
		for name := range hc.HTTPHeaders.Headers {
			if strings.EqualFold(name, "Authorization") {
				return "Authorization header"
			}
		}
	}
	return ""
}

// checkKubeletCredentials refuses, with --measurement.source=kubelet, an API server reached
// over plain http with credentials: the Summary API requests would carry them in clear text.
func checkKubeletCredentials(restCfg *rest.Config) error {
	u, err := url.Parse(restCfg.Host)
	if err != nil || u.Scheme != "http" {
		return nil //nolint:nilerr // client-go defaults a host without scheme to https, and reports bad hosts itself
	}
	if restCfg.BearerToken != "" || restCfg.BearerTokenFile != "" || restCfg.Password != "" ||
		restCfg.ExecProvider != nil || restCfg.AuthProvider != nil {
		return fmt.Errorf("--measurement.source=kubelet: the API server %s of --kubeconfig is plain http but credentials would be sent to it; use https", restCfg.Host)
	}
	return nil
}

// minWebhookTokenBytes is the shortest webhook token accepted: 32 random bytes cannot be
// guessed, and the webhook token is all that stands between the network and evictions.
const minWebhookTokenBytes = 32

// placeholderPrefix starts the token of deploy/remediator-webhook-secret.example.yaml:
// it is public, so a Secret applied without replacing it opens the webhook to anyone.
const placeholderPrefix = "REPLACE-ME"

// checkWebhookToken refuses, at start, the token of --web.bearer-token-file when it is the
// example's placeholder or shorter than minWebhookTokenBytes (after trimming white space, as
// the webhook compares it). The errors never show the token.
func checkWebhookToken(path string) error {
	if path == "" {
		return nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("--web.bearer-token-file: %w", err)
	}
	token := bytes.TrimSpace(b)
	switch {
	case len(token) == 0:
		return fmt.Errorf("--web.bearer-token-file %s is empty", path)
	case bytes.HasPrefix(bytes.ToUpper(token), []byte(placeholderPrefix)):
		return fmt.Errorf("--web.bearer-token-file %s holds the placeholder of the example Secret; "+
			"create the Secret with a random token: openssl rand -hex 32", path)
	case len(token) < minWebhookTokenBytes:
		return fmt.Errorf("--web.bearer-token-file %s holds a token of %d bytes; at least %d are required "+
			"(a random one: openssl rand -hex 32)", path, len(token), minWebhookTokenBytes)
	}
	return nil
}
