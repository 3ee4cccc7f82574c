package plugin

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
)

// testPod builds a running, ready pod on node; apply varies it.
func testPod(ns, name, uid, node string, apply ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid), Labels: map[string]string{"app": name}},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
	for _, f := range apply {
		f(p)
	}
	return p
}

func withEmptyDir(name, sizeLimit string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		ed := &corev1.EmptyDirVolumeSource{}
		if sizeLimit != "" {
			q := resource.MustParse(sizeLimit)
			ed.SizeLimit = &q
		}
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: ed}})
	}
}

func withEphemeralLimit(limit string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse(limit)}
	}
}

// exporterPod is an exporter pod of the release in namespace guard on node.
func exporterPod(name, node string) *corev1.Pod {
	return testPod("guard", name, "e-"+name, node, func(p *corev1.Pod) {
		p.Labels = map[string]string{"app.kubernetes.io/name": "emptydir-exporter"}
		p.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "metrics", ContainerPort: 9731}}
	})
}

// fakeCluster is a fake API server for the plugin: pods from a fake clientset, and the pod
// proxy, /api/v1/namespaces/{ns}/pods/{pod}:{port}/proxy/..., forwarded to an httptest
// server per exporter pod, as the API server forwards it.
type fakeCluster struct {
	client    *fake.Clientset
	proxy     Proxy
	exporters map[string]http.Handler // by exporter pod name

	mu      sync.Mutex
	proxied []string // the proxy paths asked for, in order
}

var proxyPath = regexp.MustCompile(`^/api/v1/namespaces/([^/]+)/pods/([^/:]+):(\d+)/proxy(/.*)$`)

func newFakeCluster(t *testing.T, objects ...runtime.Object) *fakeCluster {
	t.Helper()
	c := &fakeCluster{client: fake.NewClientset(objects...), exporters: map[string]http.Handler{}}
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m := proxyPath.FindStringSubmatch(r.URL.Path)
		if m == nil || m[1] != "guard" {
			http.Error(w, `{"kind":"Status","code":404}`, http.StatusNotFound)
			return
		}
		c.mu.Lock()
		c.proxied = append(c.proxied, m[2]+m[4])
		h := c.exporters[m[2]]
		c.mu.Unlock()
		if h == nil {
			http.Error(w, "error trying to reach service: dial tcp: connection refused", http.StatusServiceUnavailable)
			return
		}
		backend := httptest.NewServer(h)
		defer backend.Close()
		u, _ := url.Parse(backend.URL)
		rp := httputil.NewSingleHostReverseProxy(u)
		r.URL.Path = m[4]
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(api.Close)
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: api.URL})
	if err != nil {
		t.Fatal(err)
	}
	c.proxy = RESTProxy{Client: cs.CoreV1().RESTClient()}
	return c
}

// serveExposition answers /metrics with text, as the exporter's text format.
func serveExposition(text string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = w.Write([]byte(text))
	})
}

func testOptions(ns string) (*Options, *bytes.Buffer, *bytes.Buffer) {
	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	o := NewOptions(streams)
	o.ConfigFlags.Namespace = &ns
	o.GuardNamespace = "guard"
	return o, out, errOut
}

func errorsAs(err error, target any) bool { return errors.As(err, target) }
