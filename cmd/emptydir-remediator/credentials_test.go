package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	promconfig "github.com/prometheus/common/config"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"

	"github.com/emptydir-guard/emptydir-guard/deploy"
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

// A webhook token that can be guessed, or the example Secret's public placeholder, stops the
// remediator at start; the error says what is wrong without showing the token.
func TestWebhookTokenRefusedAtStart(t *testing.T) {
	objs, err := deploy.DecodeFile(deploy.WebhookSecretExample)
	if err != nil {
		t.Fatal(err)
	}
	example, ok := objs[0].(*corev1.Secret)
	if !ok || example.StringData["token"] == "" {
		t.Fatalf("%s: no Secret with stringData.token", deploy.WebhookSecretExample)
	}
	placeholder := example.StringData["token"]
	if len(placeholder) < minWebhookTokenBytes {
		t.Fatalf("the placeholder is %d bytes: the length check alone would refuse it, so this case tests nothing", len(placeholder))
	}
	dir := t.TempDir()
	tests := []struct {
		name    string
		content string // "-": no file
		wantErr string
	}{
		{"no file", "-", "no such file"},
		{"empty", " \n", "is empty"},
		{"the example's placeholder", placeholder + "\n", "placeholder"},
		{"the placeholder in lower case", strings.ToLower(placeholder), "placeholder"},
		{"31 bytes", strings.Repeat("a", 31), "31 bytes; at least 32"},
		{"31 bytes and white space", "  " + strings.Repeat("a", 31) + "\n\n", "31 bytes"},
		{"32 bytes", strings.Repeat("a", 32), ""},
		{"openssl rand -hex 32", "5f0c1e7a9b2d4c6e8f1a3b5c7d9e0f2a4b6c8d0e1f3a5b7c9d1e3f5a7b9c0d2e\n", ""},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, fmt.Sprintf("token-%d", i))
			if tt.content != "-" {
				if err := os.WriteFile(path, []byte(tt.content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			err := checkWebhookToken(path)
			assertErr(t, err, tt.wantErr)
			if s := strings.TrimSpace(tt.content); err != nil && tt.content != "-" && len(s) > 0 && strings.Contains(err.Error(), s) {
				t.Errorf("the error shows the token: %v", err)
			}
		})
	}
	if err := checkWebhookToken(""); err != nil {
		t.Errorf("no token file (no bearer token required, warned about by the library): %v", err)
	}
}
