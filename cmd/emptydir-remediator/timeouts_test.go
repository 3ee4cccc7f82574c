package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"

	"github.com/emptydir-guard/emptydir-guard/deploy"
	"github.com/emptydir-guard/emptydir-guard/deploy/deploytest"
	"github.com/emptydir-guard/emptydir-guard/internal/cliflag"
	"github.com/emptydir-guard/emptydir-guard/internal/httpserver"
	"github.com/emptydir-guard/emptydir-guard/remediator"
)

// hangingMeasurer never answers: each alert runs out its --web.alert-timeout.
type hangingMeasurer struct{}

func (hangingMeasurer) Measure(ctx context.Context, _ *corev1.Pod, _ remediator.Subject) (remediator.Measurement, error) {
	<-ctx.Done()
	return remediator.Measurement{}, ctx.Err()
}

// A payload of slowAlertsPerPayload alerts, each at its slowest, still gets its answer from the
// server the command builds: the write timeout covers the alerts one after the other, not one.
func TestSlowPayloadIsAnswered(t *testing.T) {
	const alertTimeout = 100 * time.Millisecond
	limit := resource.MustParse("1Mi")
	var pods []runtime.Object
	var alerts []remediator.Alert
	for i := range slowAlertsPerPayload {
		name, uid := fmt.Sprintf("web-%d", i), types.UID(fmt.Sprintf("0b7c61f5-6f4e-4a59-9d0a-2f7f7d5c3a%02d", i))
		pods = append(pods, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: uid},
			Spec: corev1.PodSpec{NodeName: "node-1", Volumes: []corev1.Volume{{Name: "empty",
				VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &limit}}}}},
		})
		alerts = append(alerts, remediator.Alert{Status: remediator.StatusFiring, StartsAt: time.Now(), Labels: map[string]string{
			"alertname": "EmptyDirOverLimit", "namespace": "default", "pod": name, "uid": string(uid), "volume": "empty"}})
	}
	cfg := remediator.DefaultConfig()
	cfg.AlertTimeout = alertTimeout
	srv, err := remediator.New(cfg, fake.NewClientset(pods...), hangingMeasurer{}, remediator.WithEventRecorder(events.NewFakeRecorder(100)))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	httpSrv := newHTTPServer(srv.Handler(), defaultServerTimeouts(alertTimeout), slog.New(slog.DiscardHandler))
	if httpSrv.WriteTimeout < time.Duration(len(alerts))*alertTimeout {
		t.Fatalf("WriteTimeout %s is shorter than the payload's %d alerts at their slowest", httpSrv.WriteTimeout, len(alerts))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = httpSrv.Serve(ln) }()
	defer httpSrv.Close()

	body, _ := json.Marshal(remediator.Payload{Version: remediator.PayloadVersion, Status: remediator.StatusFiring,
		Receiver: "r", GroupKey: "g", Alerts: alerts})
	resp, err := http.Post("http://"+ln.Addr().String()+cfg.WebhookPath, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("no answer to a payload of %d slow alerts: %v", len(alerts), err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil || len(answer) == 0 {
		t.Fatalf("answer %q cut: %v", answer, err)
	}
	if drainTimeout(alertTimeout) <= alertTimeout {
		t.Errorf("drainTimeout %s leaves an alert at its slowest no time to answer", drainTimeout(alertTimeout))
	}
}

// alertmanagerIdleConnTimeout is how long Alertmanager's webhook client (prometheus/common's
// HTTP client defaults) keeps an idle connection.
const alertmanagerIdleConnTimeout = 5 * time.Minute

// The server keeps an idle connection longer than Alertmanager does, so Alertmanager closes
// it first and never writes a webhook into a connection the server is closing.
func TestIdleTimeoutOutlastsAlertmanager(t *testing.T) {
	srv := newHTTPServer(http.NotFoundHandler(), defaultServerTimeouts(time.Second), slog.New(slog.DiscardHandler))
	idle := srv.IdleTimeout
	if idle == 0 {
		idle = srv.ReadTimeout // what net/http uses then
	}
	if idle <= alertmanagerIdleConnTimeout {
		t.Errorf("idle connections are closed after %s, before Alertmanager's own %s", idle, alertmanagerIdleConnTimeout)
	}
}

// serveOnLoopback runs newHTTPServer(h, timeouts) on a loopback port until the test ends.
func serveOnLoopback(t *testing.T, h http.Handler, timeouts httpserver.Timeouts) string {
	t.Helper()
	srv := newHTTPServer(h, timeouts, slog.New(slog.DiscardHandler))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = srv.Close()
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
	})
	return ln.Addr().String()
}

// Headers beyond maxHeaderBytes are refused before the handler runs; an Alertmanager-sized
// request with a large bearer token is not.
func TestHeaderSizeLimit(t *testing.T) {
	reached := make(chan struct{}, 10)
	addr := serveOnLoopback(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		reached <- struct{}{}
		w.WriteHeader(http.StatusNoContent)
	}), defaultServerTimeouts(time.Second))
	tests := []struct {
		name        string
		headerBytes int
		want        int
		wantHandler bool
	}{
		{"bearer token of 4 KiB", 4 << 10, http.StatusNoContent, true},
		{"headers of 256 KiB", 256 << 10, http.StatusRequestHeaderFieldsTooLarge, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/-/webhook", strings.NewReader("{}"))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+strings.Repeat("x", tc.headerBytes))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("status %d, want %d", resp.StatusCode, tc.want)
			}
			if got := len(reached) > 0; got != tc.wantHandler {
				t.Errorf("handler reached: %t, want %t", got, tc.wantHandler)
			}
			for len(reached) > 0 {
				<-reached
			}
		})
	}
}

// An idle keep-alive connection is closed after the idle timeout, not the (longer) read timeout
// net/http would fall back to.
func TestIdleConnectionClosed(t *testing.T) {
	const short, long = 100 * time.Millisecond, time.Hour
	addr := serveOnLoopback(t, http.NotFoundHandler(), httpserver.Timeouts{ReadHeader: long, Read: long, Write: long, Idle: short})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: remediator\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	// A guard far above the idle timeout: reaching it means the server kept the connection.
	if err := c.SetReadDeadline(time.Now().Add(20 * time.Second)); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no response: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.Close {
		t.Fatal("the server did not keep the connection alive")
	}
	if _, err := io.Copy(io.Discard, br); errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("the server kept the idle connection open")
	}
}

// leaseReleaseMargin is what the grace period must leave after the drain: the Lease release
// (one API update) and the exit.
const leaseReleaseMargin = 5 * time.Second

// TestGracePeriodCoversDrain: the remediator Deployment of deploy/ (the chart's defaults)
// lets the pod drain in-flight webhooks and release its Lease before the kubelet's SIGKILL,
// with the arguments it runs: a kill mid-alert loses its audit line, Event and ledger commit.
func TestGracePeriodCoversDrain(t *testing.T) {
	objs, err := deploy.BaseObjects()
	if err != nil {
		t.Fatal(err)
	}
	d := deploytest.MustFind[*appsv1.Deployment](t, objs, "emptydir-remediator")
	spec := d.Spec.Template.Spec
	c := defaultConfig()
	if err := cliflag.Parse(newApp(&c), spec.Containers[0].Args); err != nil {
		t.Fatalf("the Deployment's arguments: %v", err)
	}
	drain := drainTimeout(c.remediator.AlertTimeout)
	if spec.TerminationGracePeriodSeconds == nil {
		t.Fatalf("no terminationGracePeriodSeconds: the default 30s is shorter than the drain %v", drain)
	}
	grace := time.Duration(*spec.TerminationGracePeriodSeconds) * time.Second
	if grace < drain+leaseReleaseMargin {
		t.Errorf("terminationGracePeriodSeconds %v, the drain takes up to %v (--web.alert-timeout %v + %v) and the Lease release follows: want at least %v",
			grace, drain, c.remediator.AlertTimeout, drainGrace, drain+leaseReleaseMargin)
	}
}
