package remediator

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
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

// The lock reports this replica's acquisitions and renewals of the Lease, not its release
// (an empty holder) and not failed writes.
func TestRenewalTrackingLock(t *testing.T) {
	client := fake.NewClientset()
	var renewals []time.Time
	lock := &renewalTrackingLock{
		Interface: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: "emptydir-guard", Name: "lease"},
			Client:     client.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: "me"},
		},
		renewed: func(at time.Time) { renewals = append(renewals, at) },
	}
	ctx := t.Context()
	held := resourcelock.LeaderElectionRecord{HolderIdentity: "me", LeaseDurationSeconds: 15}
	before := time.Now()
	if err := lock.Create(ctx, held); err != nil {
		t.Fatal(err)
	}
	if _, _, err := lock.Get(ctx); err != nil { // Update needs the lease read first
		t.Fatal(err)
	}
	if err := lock.Update(ctx, held); err != nil {
		t.Fatal(err)
	}
	if err := lock.Update(ctx, resourcelock.LeaderElectionRecord{LeaseDurationSeconds: 1}); err != nil { // release
		t.Fatal(err)
	}
	if err := lock.Create(ctx, held); err == nil { // exists already: fails
		t.Fatal("second create succeeded")
	}
	if len(renewals) != 2 {
		t.Fatalf("%d renewals reported, want 2 (create, update)", len(renewals))
	}
	for _, at := range renewals {
		if at.Before(before) || at.After(time.Now()) {
			t.Errorf("renewal at %s, not the start of the write", at)
		}
	}
}

// client-go calls each callback in a goroutine of its own, so they may run in any order. A
// report of the previous leader that runs after this replica started leading, or a start
// that runs after it stopped, must not leave the flag wrong: a leader that thinks it is a
// standby forwards every webhook away until it loses the Lease, which a healthy leader never
// does.
func TestLeaderCallbacksInAnyOrder(t *testing.T) {
	lec := LeaderElectionConfig{Namespace: "emptydir-guard", Name: "emptydir-remediator", Identity: "a"}
	newServer := func() *Server {
		cfg := testConfig()
		cfg.LeaderElection = true
		s, err := New(cfg, fake.NewClientset(), &fakeMeasurer{}, WithEventRecorder(nil))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		return s
	}

	t.Run("late report of the previous leader", func(t *testing.T) {
		s := newServer()
		cb := s.electionCallbacks(lec, func() string { return "a" }) // the elector holds the Lease now
		cb.OnStartedLeading(t.Context())
		cb.OnNewLeader("b") // observed before this replica acquired, run late
		if !s.IsLeader() {
			t.Error("a late OnNewLeader(b) demoted the replica that holds the Lease")
		}
		if id := s.leaderID.Load(); id == nil || *id != "a" {
			t.Error("leader identity is not a (forwarding goes by it)")
		}
	})
	t.Run("late start after the stop", func(t *testing.T) {
		s := newServer()
		cb := s.electionCallbacks(lec, func() string { return "b" })
		ctx, cancel := context.WithCancel(t.Context())
		cancel() // the elector cancels the leading context before it calls OnStoppedLeading
		cb.OnStoppedLeading()
		cb.OnStartedLeading(ctx)
		if s.IsLeader() {
			t.Error("a late OnStartedLeading made a replica that stopped leading the leader")
		}
	})
	t.Run("another replica takes over", func(t *testing.T) {
		s := newServer()
		cb := s.electionCallbacks(lec, func() string { return "b" })
		cb.OnStartedLeading(t.Context())
		cb.OnNewLeader("b")
		if s.IsLeader() || !s.leaderKnown.Load() {
			t.Errorf("leader=%v known=%v after b took over", s.IsLeader(), s.leaderKnown.Load())
		}
	})
}
