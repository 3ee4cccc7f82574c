package main

import (
	"testing"

	promconfig "github.com/prometheus/common/config"
	"k8s.io/client-go/rest"
)

// Credentials towards the exporter or the API server never go over plain http.
func TestCredentialsNeverOverPlainHTTP(t *testing.T) {
	bearer := promconfig.HTTPClientConfig{Authorization: &promconfig.Authorization{Type: "Bearer", CredentialsFile: "/etc/token"}}
	basic := promconfig.HTTPClientConfig{BasicAuth: &promconfig.BasicAuth{Username: "u", Password: "p"}}
	header := promconfig.HTTPClientConfig{HTTPHeaders: &promconfig.Headers{Headers: map[string]promconfig.Header{"authorization": {Values: []string{"Bearer x"}}}}}
	tests := []struct {
		name    string
		mod     func(*measurementConfig)
		hc      promconfig.HTTPClientConfig
		wantErr string
	}{
		{"discovered over http, no credentials", func(*measurementConfig) {}, promconfig.HTTPClientConfig{}, ""},
		{"discovered over http with a bearer token", func(*measurementConfig) {}, bearer, "--exporter.scheme=http"},
		{"discovered over https with a bearer token", func(m *measurementConfig) { m.exporterScheme = "https" }, bearer, ""},
		{"static http URL with basic auth", func(m *measurementConfig) { m.exporterURL = "http://10.0.0.1:9731" }, basic, "--exporter.url=http://10.0.0.1:9731"},
		{"static http URL with an Authorization header", func(m *measurementConfig) { m.exporterURL = "http://10.0.0.1:9731" }, header, "Authorization header"},
		{"static https URL with a bearer token", func(m *measurementConfig) { m.exporterURL = "https://10.0.0.1:9731" }, bearer, ""},
		{"static http URL wins over the scheme flag", func(m *measurementConfig) { m.exporterScheme = "https"; m.exporterURL = "http://e:9731" }, bearer, "clear text"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := validConfig(t).measurement
			tt.mod(&m)
			assertErr(t, checkExporterCredentials(m, tt.hc), tt.wantErr)
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
