package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/emptydir-guard/emptydir-guard/remediator"
)

// hangingMeasurer never answers: each alert runs out its --web.alert-timeout.
type hangingMeasurer struct{}

func (hangingMeasurer) Measure(ctx context.Context, _ *corev1.Pod, _ string) (remediator.Measurement, error) {
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
	srv, err := remediator.New(cfg, fake.NewClientset(pods...), hangingMeasurer{}, remediator.WithEventRecorder(record.NewFakeRecorder(100)))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	httpSrv := newHTTPServer(srv.Handler(), alertTimeout, slog.New(slog.DiscardHandler))
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
