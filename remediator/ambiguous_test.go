package remediator

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"syscall"
	"testing"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	k8stesting "k8s.io/client-go/testing"
)

// An Eviction whose answer is lost may have happened. With --eviction.max-global=1 the first
// pod's eviction goes through on the API server but its answer is an error; only answers that
// prove nothing was evicted may give the cap slot back, else a second pod is evicted in the
// same window.
func TestAmbiguousEvictionErrorKeepsTheCapSlot(t *testing.T) {
	pods := schema.GroupResource{Resource: "pods"}
	tests := []struct {
		name string
		err  error
		// happened: the API server evicted the pod although the answer is err.
		happened bool
		// released: err proves nothing was evicted, so the slot is free for the next pod.
		released bool
	}{
		{name: "504 timeout (NewTimeoutError)", err: apierrors.NewTimeoutError("request did not complete within 60s", 0), happened: true},
		{name: "500 from etcd (NewInternalError)", err: apierrors.NewInternalError(errors.New("etcdserver: leader changed")), happened: true},
		{name: "500 server timeout", err: apierrors.NewServerTimeout(pods, "create", 0), happened: true},
		{name: "504 from a proxy (NewGenericServerResponse)", err: apierrors.NewGenericServerResponse(http.StatusGatewayTimeout, "post", pods, "web-0", "", 0, true), happened: true},
		{name: "503 from a proxy", err: apierrors.NewGenericServerResponse(http.StatusServiceUnavailable, "post", pods, "web-0", "", 0, true), happened: true},
		{name: "client deadline", err: &url.Error{Op: "Post", URL: "https://apiserver/api/v1/namespaces/a/pods/p1/eviction", Err: context.DeadlineExceeded}, happened: true},
		{name: "connection reset", err: &url.Error{Op: "Post", URL: "https://apiserver/api/v1/namespaces/a/pods/p1/eviction",
			Err: &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}}, happened: true},
		{name: "unexpected EOF", err: fmt.Errorf("stream error: %w", errors.New("unexpected EOF")), happened: true},
		// The same errors when the API server did not evict: the slot is held all the same
		// (fewer evictions, never more).
		{name: "504, not evicted", err: apierrors.NewTimeoutError("request did not complete within 60s", 0)},
		{name: "client deadline, not evicted", err: &url.Error{Op: "Post", URL: "https://apiserver/", Err: context.DeadlineExceeded}},
		// Answers that prove the eviction did not happen give the slot back.
		{name: "PDB refusal", err: pdbRefusal(), released: true},
		{name: "APF throttling", err: apfThrottle(), released: true},
		{name: "409 UID precondition", err: apierrors.NewConflict(pods, "p1", errors.New("precondition failed")), released: true},
		{name: "403 forbidden", err: apierrors.NewForbidden(pods, "p1", errors.New("no")), released: true},
		{name: "422 invalid", err: apierrors.NewInvalid(schema.GroupKind{Group: "policy", Kind: "Eviction"}, "p1", field.ErrorList{field.Invalid(field.NewPath("deleteOptions"), "x", "bad")}), released: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.Caps = Caps{Global: 1, Window: time.Hour}
			p1, p2 := newPod("a", "p1", testUID("p1")).build(), newPod("b", "p2", testUID("p2")).node("node-2").build()
			e := newEnv(t, cfg, p1, p2)
			e.measurer.used[string(p1.UID)], e.measurer.used[string(p2.UID)] = 10*mib, 10*mib
			e.client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if a.GetSubresource() != "eviction" || a.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction).Name != "p1" {
					return false, nil, nil
				}
				if tt.happened {
					if _, _, err := evictionSimulator(e.client)(a); err != nil {
						t.Errorf("simulated eviction: %v", err)
					}
				}
				return true, nil, tt.err
			})

			code, resp := e.post(payloadJSON(t, firing("a", "p1", testUID("p1"))))
			if got := resp.Alerts[0]; !tt.released && (code != http.StatusServiceUnavailable || got.Reason != "eviction_unconfirmed") {
				t.Errorf("p1: %d %s/%s, want 503 error/eviction_unconfirmed (%s)", code, got.Outcome, got.Reason, got.Message)
			}
			_, resp = e.post(payloadJSON(t, firing("b", "p2", testUID("p2"))))
			got := resp.Alerts[0]
			if tt.released {
				if got.Outcome != OutcomeEvicted {
					t.Errorf("p2 after a refused eviction: %s/%s, want evicted (%s)", got.Outcome, got.Reason, got.Message)
				}
				return
			}
			if got.Outcome != OutcomeSkipped || got.Reason != SkipCapGlobal {
				t.Errorf("p2 after an unconfirmed eviction: %s/%s, want skipped/%s (%s)", got.Outcome, got.Reason, SkipCapGlobal, got.Message)
			}
			if n := e.evictionsOf("p2"); n != 0 {
				t.Errorf("p2: %d Eviction calls with the only slot held by p1", n)
			}
			// Alertmanager's retry of p1: gone when the eviction happened, else tried again
			// in the slot p1 holds (here it goes through); p2 is still over the cap.
			e.client.PrependReactor("create", "pods", evictionSimulator(e.client))
			_, resp = e.post(payloadJSON(t, firing("a", "p1", testUID("p1"))))
			want := OutcomeEvicted
			if tt.happened {
				want = OutcomeGone
			}
			if got := resp.Alerts[0]; got.Outcome != want {
				t.Errorf("p1's retry: %s/%s, want %s (%s)", got.Outcome, got.Reason, want, got.Message)
			}
			_, resp = e.post(payloadJSON(t, firing("b", "p2", testUID("p2"))))
			if got := resp.Alerts[0]; got.Reason != SkipCapGlobal || e.evictionsOf("p2") != 0 {
				t.Errorf("p2 after p1's retry: %s/%s, want skipped/%s", got.Outcome, got.Reason, SkipCapGlobal)
			}
		})
	}
}

// evictionsOf counts the Eviction API calls for the named pod.
func (e *env) evictionsOf(pod string) int {
	n := 0
	for _, a := range e.client.Actions() {
		if a.GetVerb() == "create" && a.GetSubresource() == "eviction" && a.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction).Name == pod {
			n++
		}
	}
	return n
}

// A retry that takes over an unconfirmed slot and is then refused keeps the slot: the first
// attempt may still be carried out by the API server.
func TestLedgerUnconfirmedSlotIsNeverReleased(t *testing.T) {
	ctx := t.Context()
	l := newLedger(&memoryStore{}, time.Hour, time.Hour)
	caps := Caps{Global: 1, Window: time.Hour}
	r, why, _, err := l.reserve(ctx, "uid-a", "n1", "a", testNow, caps)
	if err != nil || why != "" {
		t.Fatalf("reserve: %q %v", why, err)
	}
	if err := r.commit(ctx, outcomeUnconfirmed, testNow); err != nil {
		t.Fatal(err)
	}
	// The same pod again, within the cooldown: it takes over its own slot.
	r, why, _, err = l.reserve(ctx, "uid-a", "n1", "a", testNow.Add(time.Second), caps)
	if err != nil || why != "" {
		t.Fatalf("retry of the same pod: %q %v", why, err)
	}
	if err := r.release(ctx); err != nil { // e.g. a PDB refused the retry
		t.Fatal(err)
	}
	st, _, _ := l.store.load(ctx)
	if len(st.Entries) != 1 || st.Entries[0].Outcome != outcomeUnconfirmed {
		t.Fatalf("entries after the refused retry: %+v, want the one unconfirmed slot", st.Entries)
	}
	if _, why, _, _ = l.reserve(ctx, "uid-b", "n2", "b", testNow.Add(2*time.Second), caps); why != SkipCapGlobal {
		t.Errorf("another pod: %q, want %s", why, SkipCapGlobal)
	}
}
