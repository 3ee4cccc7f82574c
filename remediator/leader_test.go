package remediator

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"
)

// Two replicas on one Lease: exactly one leads, the other is a ready standby answering 503;
// when the leader stops, the standby takes over.
func TestLeaderElectionTwoReplicas(t *testing.T) {
	client := fake.NewClientset()
	cfg := testConfig()
	cfg.LeaderElection = true
	newReplica := func(id string) (*Server, context.CancelFunc, chan struct{}) {
		s, err := New(cfg, client, &fakeMeasurer{}, WithEventRecorder(nil))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := s.RunLeaderElection(ctx, LeaderElectionConfig{Namespace: "emptydir-guard", Name: "emptydir-remediator", Identity: id,
				LeaseDuration: time.Second, RenewDeadline: 500 * time.Millisecond, RetryPeriod: 100 * time.Millisecond}); err != nil {
				t.Error(err)
			}
		}()
		return s, cancel, done
	}
	a, stopA, doneA := newReplica("a")
	b, stopB, doneB := newReplica("b")
	defer func() { stopA(); stopB(); <-doneA; <-doneB }()

	waitFor(t, "one leader and a standby that knows it", func() bool {
		return a.IsLeader() != b.IsLeader() && a.leaderKnown.Load() && b.leaderKnown.Load()
	})
	leader, standby := a, b
	stopLeader, leaderDone := stopA, doneA
	if b.IsLeader() {
		leader, standby = b, a
		stopLeader, leaderDone = stopB, doneB
	}
	for _, c := range []struct {
		s    *Server
		want int
	}{{leader, http.StatusOK}, {standby, http.StatusServiceUnavailable}} {
		rec := httptest.NewRecorder()
		c.s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/webhook", bytesReader(payloadJSON(t))))
		if rec.Code != c.want {
			t.Errorf("webhook on leader=%v: %d, want %d", c.s.IsLeader(), rec.Code, c.want)
		}
		rec = httptest.NewRecorder()
		c.s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		if rec.Code != http.StatusOK {
			t.Errorf("readyz on leader=%v: %d", c.s.IsLeader(), rec.Code)
		}
	}
	stopLeader()
	<-leaderDone
	if leader.IsLeader() {
		t.Error("stopped replica still leads")
	}
	waitFor(t, "the standby to take over", standby.IsLeader)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
