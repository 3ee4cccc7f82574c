package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"

	"github.com/emptydir-guard/emptydir-guard/remediator"
)

// journal records, in order, what the fake API server saw.
type journal struct {
	mu      sync.Mutex
	entries []string
	changed chan struct{}
}

func (j *journal) add(e string) {
	j.mu.Lock()
	j.entries = append(j.entries, e)
	j.mu.Unlock()
	select {
	case j.changed <- struct{}{}:
	default:
	}
}

func (j *journal) has(e string) bool { return j.index(e) >= 0 }

// index is the position of e in the journal, -1 when it is not there.
func (j *journal) index(e string) int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Index(j.entries, e)
}

// gateMeasurer answers over the limit once released; entered is closed when the first
// measurement starts.
type gateMeasurer struct {
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func (m *gateMeasurer) Measure(_ context.Context, pod *corev1.Pod, subject remediator.Subject) (remediator.Measurement, error) {
	m.once.Do(func() { close(m.entered) })
	<-m.release
	return remediator.Measurement{Source: "fake", Node: pod.Spec.NodeName, Subject: subject, UsedBytes: 10 << 20, MeasuredAt: time.Now()}, nil
}

// On SIGTERM a leader first finishes the webhook it is handling (the eviction happens as
// leader) and only then releases the Lease: the old order released the Lease first, so a
// standby could lead while the old leader still evicted.
func TestShutdownDrainsBeforeReleasingTheLease(t *testing.T) {
	limit := resource.MustParse("1Mi")
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-0", UID: "0b7c61f5-6f4e-4a59-9d0a-2f7f7d5c3a11"},
		Spec: corev1.PodSpec{NodeName: "node-1", Volumes: []corev1.Volume{{Name: "empty",
			VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &limit}}}}},
	}
	client := fake.NewClientset(pod)
	j := &journal{changed: make(chan struct{}, 1)}
	client.PrependReactor("update", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if l := a.(k8stesting.UpdateAction).GetObject().(*coordinationv1.Lease); l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
			j.add("lease released")
		}
		return false, nil, nil
	})
	client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "eviction" {
			j.add("evicted")
			return true, nil, nil
		}
		return false, nil, nil
	})

	cfg := remediator.DefaultConfig()
	cfg.LeaderElection = true
	m := &gateMeasurer{entered: make(chan struct{}), release: make(chan struct{})}
	srv, err := remediator.New(cfg, client, m, remediator.WithEventRecorder(events.NewFakeRecorder(10)))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	httpSrv := &http.Server{Handler: srv.Handler()}
	lec := remediator.LeaderElectionConfig{Namespace: "emptydir-guard", Name: "emptydir-remediator", Identity: "a",
		LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 100 * time.Millisecond}
	ctx, sigterm := context.WithCancel(t.Context())
	defer sigterm()
	done := make(chan error, 1)
	go func() {
		done <- serveUntilDone(ctx, httpSrv, func() error { return httpSrv.Serve(ln) },
			func(ctx context.Context) error { return srv.RunLeaderElection(ctx, lec) }, 30*time.Second)
	}()
	for !srv.IsLeader() {
		time.Sleep(10 * time.Millisecond)
	}

	body, _ := json.Marshal(remediator.Payload{Version: remediator.PayloadVersion, Status: remediator.StatusFiring,
		Receiver: "r", GroupKey: "g", Alerts: []remediator.Alert{{Status: remediator.StatusFiring, StartsAt: time.Now(),
			Labels: map[string]string{"alertname": "EmptyDirOverLimit", "namespace": "default", "pod": "web-0", "uid": "0b7c61f5-6f4e-4a59-9d0a-2f7f7d5c3a11", "volume": "empty"}}}})
	answered := make(chan int, 1)
	go func() {
		resp, err := http.Post("http://"+ln.Addr().String()+"/webhook", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Error(err)
			answered <- 0
			return
		}
		resp.Body.Close()
		answered <- resp.StatusCode
	}()
	select {
	case <-m.entered:
	case code := <-answered:
		t.Fatalf("webhook answered %d before its live measurement started", code)
	}
	sigterm()
	// Give a release that does not wait for the drain every chance to show: hold the
	// in-flight webhook until the Lease is released or a second has passed.
	deadline := time.After(time.Second)
wait:
	for !j.has("lease released") {
		select {
		case <-j.changed:
		case <-deadline:
			break wait
		}
	}
	close(m.release)
	if code := <-answered; code != http.StatusOK {
		t.Errorf("in-flight webhook answered %d, want 200", code)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	ev, rel := j.index("evicted"), j.index("lease released")
	if ev < 0 || rel < 0 || rel < ev {
		t.Errorf("journal %v: want the in-flight eviction before the Lease release", j.entries)
	}
}
