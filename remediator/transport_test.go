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

	evict := func(wrap bool) (int32, error) {
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
		return requests.Load(), err
	}

	n, err := evict(true)
	if !apierrors.IsTooManyRequests(err) || n != 1 {
		t.Errorf("wrapped: err=%v after %d requests, want a 429 StatusError after 1", err, n)
	}
	n, err = evict(false)
	if n < 2 {
		t.Errorf("unwrapped: %d requests (err=%v); client-go no longer retries 429s, so the wrapper may be dropped", n, err)
	}
}

// The API server's two kinds of 429 to an eviction, through a real clientset with
// WithoutEvictionRetries (which strips Retry-After): a PodDisruptionBudget refusal names the
// budget in a status cause; API Priority and Fairness answers plain text with Retry-After.
// Each is reported for what it is, after one request.
func TestEviction429sToldApart(t *testing.T) {
	tests := []struct {
		name        string
		contentType string
		body        string
		want        string
	}{
		{name: "PodDisruptionBudget refusal", contentType: "application/json", want: EvictionPDBBlocked,
			body: `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"TooManyRequests",` +
				`"message":"Cannot evict pod as it would violate the pod's disruption budget.","code":429,` +
				`"details":{"causes":[{"reason":"DisruptionBudget","message":"The disruption budget web needs 1 healthy pods and has 1 currently"}]}}`},
		{name: "PodDisruptionBudget not yet processed", contentType: "application/json", want: EvictionPDBBlocked,
			body: `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"TooManyRequests",` +
				`"message":"Cannot evict pod as it would violate the pod's disruption budget.","code":429,` +
				`"details":{"retryAfterSeconds":10,"causes":[{"reason":"DisruptionBudget","message":"The disruption budget web is still being processed by the server."}]}}`},
		{name: "API Priority and Fairness", contentType: "text/plain; charset=utf-8", want: EvictionThrottled,
			body: "Too many requests, please try again later.\n"},
		{name: "429 Status without a cause", contentType: "application/json", want: EvictionThrottled,
			body: `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"TooManyRequests","message":"too many requests","code":429}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var requests atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				requests.Add(1)
				w.Header().Set("Content-Type", tt.contentType)
				w.Header().Set("Retry-After", "1")
				w.WriteHeader(http.StatusTooManyRequests)
				_, _ = w.Write([]byte(tt.body))
			}))
			defer srv.Close()
			cfg := &rest.Config{Host: srv.URL}
			cfg.Wrap(WithoutEvictionRetries)
			client, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				t.Fatal(err)
			}
			s := &Server{cfg: testConfig(), client: client}
			pod := newPod("ns", "p", uid1).build()
			got, err := s.evict(t.Context(), pod, pod.UID, "test", false)
			if got != tt.want || err == nil {
				t.Errorf("result %q (err %v), want %q", got, err, tt.want)
			}
			if n := requests.Load(); n != 1 {
				t.Errorf("%d requests, want 1", n)
			}
		})
	}
}
