package remediator

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// TestWithoutEvictionRetries runs a real clientset against a server that answers
// evictions as the API server does for a PodDisruptionBudget that forbids them
// (429 with Retry-After): with the wrapper the 429 comes back after one request;
// without it client-go sleeps and retries until the deadline.
func TestWithoutEvictionRetries(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		if r.Method != http.MethodPost || r.URL.Path != "/api/v1/namespaces/ns/pods/p/eviction" {
			t.Errorf("unexpected %s %s", r.Method, r.URL.Path)
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"TooManyRequests",` +
			`"message":"Cannot evict pod as it would violate the pod's disruption budget.","code":429,` +
			`"details":{"causes":[{"reason":"DisruptionBudget","message":"The disruption budget guarded needs 1 healthy pods and has 1 currently"}]}}`))
	}))
	defer srv.Close()

	evict := func(wrap bool) (error, int32) {
		requests.Store(0)
		cfg := &rest.Config{Host: srv.URL}
		if wrap {
			cfg.Wrap(WithoutEvictionRetries)
		}
		client, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2500*time.Millisecond)
		defer cancel()
		err = client.PolicyV1().Evictions("ns").Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}})
		return err, requests.Load()
	}

	err, n := evict(true)
	if !apierrors.IsTooManyRequests(err) || n != 1 {
		t.Errorf("wrapped: err=%v after %d requests, want a 429 StatusError after 1", err, n)
	}
	err, n = evict(false)
	if n < 2 {
		t.Errorf("unwrapped: %d requests (err=%v); client-go no longer retries 429s, so the wrapper may be dropped", n, err)
	}
}
