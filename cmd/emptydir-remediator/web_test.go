package main

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/exporter-toolkit/web"
	"golang.org/x/crypto/bcrypt"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/emptydir-guard/emptydir-guard/remediator"
)

type noMeasurer struct{ t *testing.T }

func (m noMeasurer) Measure(_ context.Context, _ *corev1.Pod, _ remediator.Subject) (remediator.Measurement, error) {
	m.t.Error("unauthenticated request reached the measurer")
	return remediator.Measurement{}, nil
}

// Basic auth from exporter-toolkit's web config guards the webhook: unauthenticated requests
// get 401 and reach neither the API server nor the measurer.
func TestWebConfigBasicAuth(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	cfgFile := filepath.Join(t.TempDir(), "web.yml")
	if err := os.WriteFile(cfgFile, []byte("basic_auth_users:\n  alertmanager: "+string(hash)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset()
	rc := remediator.DefaultConfig()
	srv, err := remediator.New(rc, client, noMeasurer{t})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	httpSrv := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 5 * time.Second}
	flags := &web.FlagConfig{WebConfigFile: &cfgFile}
	go func() { _ = web.Serve(l, httpSrv, flags, slog.New(slog.DiscardHandler)) }()
	defer httpSrv.Close()

	body := []byte(`{"version":"4","alerts":[{"status":"firing","labels":{"namespace":"default","pod":"p","uid":"5cf142d1-7a2d-4698-a7e0-f6ebfc0d4b7d","volume":"empty"}}]}`)
	tests := []struct {
		name       string
		user, pass string
		want       int
	}{
		{"no credentials", "", "", http.StatusUnauthorized},
		{"wrong password", "alertmanager", "nope", http.StatusUnauthorized},
		{"unknown user", "someone", "s3cret", http.StatusUnauthorized},
	}
	for _, tt := range tests {
		req, _ := http.NewRequest(http.MethodPost, "http://"+l.Addr().String()+"/webhook", bytes.NewReader(body))
		if tt.user != "" {
			req.SetBasicAuth(tt.user, tt.pass)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("%s: %d, want %d", tt.name, resp.StatusCode, tt.want)
		}
	}
	if n := len(client.Actions()); n != 0 {
		t.Errorf("%d API calls for unauthenticated requests", n)
	}
	// With the right credentials the request gets through (the pod does not exist: gone).
	req, _ := http.NewRequest(http.MethodPost, "http://"+l.Addr().String()+"/webhook", bytes.NewReader(body))
	req.SetBasicAuth("alertmanager", "s3cret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("authenticated: %d, want 200", resp.StatusCode)
	}
}
