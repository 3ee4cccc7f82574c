package main

import (
	"fmt"
	"net/url"
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
		return nil // client-go defaults a host without scheme to https, and reports bad hosts itself
	}
	if restCfg.BearerToken != "" || restCfg.BearerTokenFile != "" || restCfg.Password != "" ||
		restCfg.ExecProvider != nil || restCfg.AuthProvider != nil {
		return fmt.Errorf("--measurement.source=kubelet: the API server %s of --kubeconfig is plain http but credentials would be sent to it; use https", restCfg.Host)
	}
	return nil
}
