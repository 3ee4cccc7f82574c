package remediator

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"
)

// testNow is the fixed time of the handler tests.
var testNow = time.Date(2026, 12, 2, 17, 0, 0, 0, time.UTC)

// testUID returns a UID of the API server's form (a lowercase UUID), the same for a name.
func testUID(name string) string {
	return fmt.Sprintf("%08x-0000-4000-8000-000000000000", crc32.ChecksumIEEE([]byte(name)))
}

// podBuilder builds test pods: by default scheduled on node-1 with an emptyDir "empty" of 1Mi.
type podBuilder struct{ pod *corev1.Pod }

func newPod(ns, name, uid string) *podBuilder {
	limit := resource.MustParse("1Mi")
	return &podBuilder{pod: &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid), Labels: map[string]string{"app": "demo"}},
		Spec: corev1.PodSpec{
			NodeName: "node-1",
			Volumes:  []corev1.Volume{{Name: "empty", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &limit}}}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}}
}

func (b *podBuilder) node(n string) *podBuilder { b.pod.Spec.NodeName = n; return b }
func (b *podBuilder) annotate(k, v string) *podBuilder {
	if b.pod.Annotations == nil {
		b.pod.Annotations = map[string]string{}
	}
	b.pod.Annotations[k] = v
	return b
}
func (b *podBuilder) ownedBy(apiVersion, kind string) *podBuilder {
	yes := true
	b.pod.OwnerReferences = append(b.pod.OwnerReferences, metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: "owner", UID: "owner-uid", Controller: &yes})
	return b
}
func (b *podBuilder) priorityClass(name string) *podBuilder {
	b.pod.Spec.PriorityClassName = name
	return b
}
func (b *podBuilder) priority(p int32) *podBuilder { b.pod.Spec.Priority = &p; return b }
func (b *podBuilder) limit(q string) *podBuilder {
	l := resource.MustParse(q)
	b.pod.Spec.Volumes[0].EmptyDir.SizeLimit = &l
	return b
}
func (b *podBuilder) noLimit() *podBuilder { b.pod.Spec.Volumes[0].EmptyDir.SizeLimit = nil; return b }
func (b *podBuilder) terminating() *podBuilder {
	t := metav1.NewTime(testNow)
	b.pod.DeletionTimestamp = &t
	return b
}

// ended puts the pod in phase (Failed, Succeeded) as the kubelet does when the pod's
// containers have ended, with reason (the kubelet's "Evicted", or "").
func (b *podBuilder) ended(phase corev1.PodPhase, reason string) *podBuilder {
	b.pod.Status.Phase, b.pod.Status.Reason = phase, reason
	return b
}
func (b *podBuilder) build() *corev1.Pod { return b.pod.DeepCopy() }

// firing returns a firing alert for the volume "empty" of a pod.
func firing(ns, pod, uid string) Alert {
	return Alert{
		Status:      StatusFiring,
		Labels:      map[string]string{"alertname": "EmptyDirOverLimit", LabelNamespace: ns, LabelPod: pod, LabelUID: uid, LabelVolume: "empty", "node": "node-1"},
		Annotations: map[string]string{"summary": "emptyDir over its limit", "used_bytes": "1"},
		StartsAt:    testNow.Add(-time.Minute),
		Fingerprint: fmt.Sprintf("%016x", len(ns)+len(pod)+len(uid)),
	}
}

func resolved(a Alert) Alert { a.Status = StatusResolved; a.EndsAt = testNow; return a }

// payloadJSON encodes a version 4 payload holding alerts.
func payloadJSON(t testing.TB, alerts ...Alert) []byte {
	t.Helper()
	p := Payload{
		Version: PayloadVersion, GroupKey: `{}:{alertname="EmptyDirOverLimit"}`, Status: StatusFiring,
		Receiver: "emptydir-remediator", GroupLabels: map[string]string{"alertname": "EmptyDirOverLimit"},
		CommonLabels: map[string]string{"alertname": "EmptyDirOverLimit"}, ExternalURL: "http://alertmanager.example:9093",
		Alerts: alerts,
	}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fakeMeasurer answers from a table keyed by pod UID.
type fakeMeasurer struct {
	mu    sync.Mutex
	used  map[string]int64
	err   error
	at    time.Time
	calls int
	// asked is the subject of every call, in order.
	asked []Subject
}

func (f *fakeMeasurer) Measure(_ context.Context, pod *corev1.Pod, subject Subject) (Measurement, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	f.asked = append(f.asked, subject)
	if f.err != nil {
		return Measurement{}, f.err
	}
	used, ok := f.used[string(pod.UID)]
	if !ok {
		return Measurement{}, measureErr(MeasureNotFound, "no such pod")
	}
	at := f.at
	if at.IsZero() {
		at = testNow.Add(-time.Second)
	}
	return Measurement{Source: "fake", Node: pod.Spec.NodeName, Subject: subject, UsedBytes: used, MeasuredAt: at}, nil
}

// evictionSimulator makes the fake clientset behave like the Eviction API: it checks the UID
// precondition (409) and deletes the pod.
func evictionSimulator(client *fake.Clientset) k8stesting.ReactionFunc {
	return func(action k8stesting.Action) (bool, runtime.Object, error) {
		ev := action.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction)
		podsGVR := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
		obj, err := client.Tracker().Get(podsGVR, ev.Namespace, ev.Name)
		if err != nil {
			return true, nil, err
		}
		pod := obj.(*corev1.Pod)
		if ev.DeleteOptions != nil && ev.DeleteOptions.Preconditions != nil && ev.DeleteOptions.Preconditions.UID != nil &&
			*ev.DeleteOptions.Preconditions.UID != pod.UID {
			return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, ev.Name,
				fmt.Errorf("precondition failed: UID in precondition: %s, UID in object meta: %s", *ev.DeleteOptions.Preconditions.UID, pod.UID))
		}
		if ev.DeleteOptions != nil && len(ev.DeleteOptions.DryRun) > 0 {
			return true, nil, nil // checked, not carried out
		}
		return true, nil, client.Tracker().Delete(podsGVR, ev.Namespace, ev.Name)
	}
}

// env is a Server on a fake clientset, with a fake measurer and event recorder.
type env struct {
	t        *testing.T
	client   *fake.Clientset
	measurer *fakeMeasurer
	recorder *events.FakeRecorder
	srv      *Server
	handler  http.Handler
	now      time.Time
	mu       sync.Mutex
}

func newEnv(t *testing.T, cfg Config, pods ...*corev1.Pod) *env {
	t.Helper()
	return newEnvMeasuring(t, cfg, nil, pods...)
}

// newEnvMeasuring is newEnv with measurer instead of the fake measurer (nil: the fake).
func newEnvMeasuring(t *testing.T, cfg Config, measurer LiveMeasurer, pods ...*corev1.Pod) *env {
	t.Helper()
	objs := make([]runtime.Object, 0, len(pods))
	for _, p := range pods {
		objs = append(objs, p)
	}
	e := &env{t: t, client: fake.NewClientset(objs...), measurer: &fakeMeasurer{used: map[string]int64{}},
		recorder: events.NewFakeRecorder(100), now: testNow}
	e.client.PrependReactor("create", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		return evictionSimulator(e.client)(action)
	})
	if measurer == nil {
		measurer = e.measurer
	}
	srv, err := New(cfg, e.client, measurer, WithEventRecorder(e.recorder), WithClock(e.clock))
	if err != nil {
		t.Fatal(err)
	}
	e.srv, e.handler = srv, srv.Handler()
	return e
}

func (e *env) clock() time.Time { e.mu.Lock(); defer e.mu.Unlock(); return e.now }
func (e *env) advance(d time.Duration) {
	e.mu.Lock()
	e.now = e.now.Add(d)
	e.mu.Unlock()
	e.measurer.mu.Lock()
	e.measurer.at = e.now.Add(-time.Second)
	e.measurer.mu.Unlock()
}

// pdbRefusal is the Eviction API's answer when a PodDisruptionBudget forbids the eviction
// (k8s.io/kubernetes pkg/registry/core/pod/storage/eviction.go).
func pdbRefusal() error {
	err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{
		Type: policyv1.DisruptionBudgetCause, Message: "The disruption budget web needs 1 healthy pods and has 1 currently"})
	return err
}

// apfThrottle is what client-go makes of API Priority and Fairness rejecting a request:
// 429, a plain-text body, Retry-After.
func apfThrottle() error {
	return apierrors.NewGenericServerResponse(http.StatusTooManyRequests, "post", schema.GroupResource{Resource: "pods"},
		"web-0", "Too many requests, please try again later.", 1, true)
}

// injectEvictionError makes every eviction fail with err (before the simulator).
func (e *env) injectEvictionError(err error) {
	e.client.PrependReactor("create", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		return true, nil, err
	})
}

// post sends body to the webhook and decodes the answer.
func (e *env) post(body []byte, header ...string) (int, WebhookResponse) {
	e.t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/webhook", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	e.handler.ServeHTTP(rec, req)
	var resp WebhookResponse
	if ct := rec.Header().Get("Content-Type"); strings.HasPrefix(ct, "application/json") {
		if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
			e.t.Fatalf("answer is not JSON: %v: %s", err, rec.Body.String())
		}
	}
	return rec.Code, resp
}

// evictions counts the Eviction API calls made on the fake clientset.
func (e *env) evictions() int {
	n := 0
	for _, a := range e.client.Actions() {
		if a.GetVerb() == "create" && a.GetResource().Resource == "pods" && a.GetSubresource() == "eviction" {
			n++
		}
	}
	return n
}

// evictionKinds counts the Eviction API calls made on the fake clientset: real ones and dry runs.
func (e *env) evictionKinds() (evicted, dryRun int) {
	for _, a := range e.client.Actions() {
		if a.GetVerb() != "create" || a.GetResource().Resource != "pods" || a.GetSubresource() != "eviction" {
			continue
		}
		if ev := a.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction); ev.DeleteOptions != nil && len(ev.DeleteOptions.DryRun) > 0 {
			dryRun++
		} else {
			evicted++
		}
	}
	return evicted, dryRun
}

// events drains the recorded events.
func (e *env) events() []string {
	var out []string
	for {
		select {
		case ev := <-e.recorder.Events:
			out = append(out, ev)
		default:
			return out
		}
	}
}

func testConfig() Config {
	c := DefaultConfig()
	c.Caps = Caps{}
	return c
}

func httptestRecorder() *httptest.ResponseRecorder { return httptest.NewRecorder() }

func ioNopCloser(r *strings.Reader) io.ReadCloser { return io.NopCloser(r) }

type k8stestingRestrictions = k8stesting.ListRestrictions

// evictionErrorFor fails the eviction of the named pod with err.
func evictionErrorFor(pod string, err error) k8stesting.ReactionFunc {
	return func(action k8stesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		if action.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction).Name != pod {
			return false, nil, nil
		}
		return true, nil, err
	}
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }

// leadNow makes s the leader as leader election does, with a Lease it renewed just now.
func leadNow(s *Server) {
	s.leaseTiming.Store(&leaseTiming{renewDeadline: 10 * time.Second, leaseDuration: 15 * time.Second})
	s.leaseRenewed.Store(time.Now().UnixNano())
	s.setLeader(true)
}
