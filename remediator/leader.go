package remediator

import (
	"context"
	"errors"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// LeaderElectionConfig names the Lease replicas compete for and its timing.
type LeaderElectionConfig struct {
	Namespace     string
	Name          string
	Identity      string
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
}

// RunLeaderElection competes for the Lease until ctx ends. While this replica holds it the
// server acts on webhooks; otherwise it forwards them to the leader (WithLeaderForwarding) or
// answers 503 and closes the connection, so that Alertmanager's retry may reach the leader
// through the Service. After losing the lease it competes again.
// The Server must have been created with Config.LeaderElection.
func (s *Server) RunLeaderElection(ctx context.Context, lec LeaderElectionConfig) error {
	if !s.cfg.LeaderElection {
		return errors.New("leader election is not enabled in the remediator configuration")
	}
	s.identity.Store(&lec.Identity)
	s.leaseTiming.Store(&leaseTiming{renewDeadline: lec.RenewDeadline, leaseDuration: lec.LeaseDuration})
	lock := &renewalTrackingLock{
		Interface: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: lec.Namespace, Name: lec.Name},
			Client:     s.client.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: lec.Identity},
		},
		renewed: func(at time.Time) { s.leaseRenewed.Store(at.UnixNano()) },
	}
	var le *leaderelection.LeaderElector
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		Name:            Component,
		LeaseDuration:   lec.LeaseDuration,
		RenewDeadline:   lec.RenewDeadline,
		RetryPeriod:     lec.RetryPeriod,
		ReleaseOnCancel: true,
		// The callbacks run only inside le.Run, after le is set.
		Callbacks: s.electionCallbacks(lec, func() string { return le.GetLeader() }),
	})
	if err != nil {
		return err
	}
	for ctx.Err() == nil {
		le.Run(ctx)
	}
	return nil
}

// electionCallbacks are leader election's callbacks; observed returns the Lease holder the
// elector observes now. client-go runs OnStartedLeading and OnNewLeader each in a goroutine
// of its own, so they may run in any order and late: each decides from the elector's state
// now (its leading context, the holder it observes), not from the order they arrive in.
func (s *Server) electionCallbacks(lec LeaderElectionConfig, observed func() string) leaderelection.LeaderCallbacks {
	return leaderelection.LeaderCallbacks{
		OnStartedLeading: func(ctx context.Context) {
			s.electionMu.Lock()
			defer s.electionMu.Unlock()
			// The elector cancels ctx before it calls OnStoppedLeading: a start that runs
			// after the stop finds it cancelled.
			if ctx.Err() != nil {
				return
			}
			s.logger.Info("leader election: now leading", "lease", lec.Namespace+"/"+lec.Name, "identity", lec.Identity)
			s.leaderID.Store(&lec.Identity)
			s.setLeader(true)
		},
		OnStoppedLeading: func() {
			s.electionMu.Lock()
			defer s.electionMu.Unlock()
			s.logger.Info("leader election: stopped leading", "lease", lec.Namespace+"/"+lec.Name, "identity", lec.Identity)
			s.setLeader(false)
		},
		OnNewLeader: func(string) {
			s.electionMu.Lock()
			defer s.electionMu.Unlock()
			// The reported identity may be an earlier holder than the current one.
			holder := observed()
			s.leaderID.Store(&holder)
			if holder != lec.Identity {
				s.logger.Info("leader election: another replica leads", "leader", holder)
				s.setLeader(false)
			}
		},
	}
}

// leaseTiming is the Lease timing leader election runs with.
type leaseTiming struct {
	renewDeadline, leaseDuration time.Duration
}

// renewalTrackingLock is the Lease lock that reports when this replica last wrote the Lease
// as its holder (acquired or renewed it): the time the write started, because the other
// replicas count the Lease's duration from when they see the write, which is later.
type renewalTrackingLock struct {
	resourcelock.Interface
	renewed func(start time.Time)
}

func (l *renewalTrackingLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	start := time.Now()
	err := l.Interface.Create(ctx, ler)
	l.track(start, ler, err)
	return err
}

func (l *renewalTrackingLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	start := time.Now()
	err := l.Interface.Update(ctx, ler)
	l.track(start, ler, err)
	return err
}

func (l *renewalTrackingLock) track(start time.Time, ler resourcelock.LeaderElectionRecord, err error) {
	// A release writes an empty holder: that is no renewal.
	if err == nil && ler.HolderIdentity == l.Identity() {
		l.renewed(start)
	}
}

// leadership reports whether this replica may act at now and, with leader election, until
// when another replica cannot have taken the Lease over: the last renewal plus the Lease's
// duration. It may act only within the renew deadline of its last renewal, the condition
// under which client-go's elector keeps leading, checked at the moment of acting rather
// than when the elector's loop next notices; the rest of the Lease's duration is the margin
// for the action itself. Without leader election it always may, with no end.
func (s *Server) leadership(now time.Time) (leaseEnd time.Time, ok bool) {
	if !s.cfg.LeaderElection {
		return time.Time{}, s.leader.Load()
	}
	timing := s.leaseTiming.Load()
	renewed := s.leaseRenewed.Load()
	if !s.leader.Load() || timing == nil || renewed == 0 {
		return time.Time{}, false
	}
	at := time.Unix(0, renewed)
	return at.Add(timing.leaseDuration), now.Before(at.Add(timing.renewDeadline))
}

// checkLeadership stops a replica that lost the Lease while it measured: only the leader acts.
func (s *Server) checkLeadership(ctx context.Context, r *remediation) (bool, error) {
	// Leadership may have moved while this payload was worked through (measurements take
	// long): ask again right before acting, against the time of the last Lease renewal, not
	// only the elector's flag.
	leaseEnd, leading := s.leadership(time.Now())
	if !leading {
		s.releaseSlot(ctx, r.slot)
		r.decide(OutcomeNotLeader, "not_leader", "%s; not evicted: this replica is no longer the leader, retry", r.usage)
		return true, nil
	}
	r.leaseEnd = leaseEnd
	return false, nil
}
