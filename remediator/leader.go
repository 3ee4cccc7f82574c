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
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: lec.Namespace, Name: lec.Name},
		Client:     s.client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: lec.Identity},
	}
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		Name:            Component,
		LeaseDuration:   lec.LeaseDuration,
		RenewDeadline:   lec.RenewDeadline,
		RetryPeriod:     lec.RetryPeriod,
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) {
				s.logger.Info("leader election: now leading", "lease", lec.Namespace+"/"+lec.Name, "identity", lec.Identity)
				s.leaderID.Store(&lec.Identity)
				s.setLeader(true)
			},
			OnStoppedLeading: func() {
				s.logger.Info("leader election: stopped leading", "lease", lec.Namespace+"/"+lec.Name, "identity", lec.Identity)
				s.setLeader(false)
			},
			OnNewLeader: func(identity string) {
				s.leaderID.Store(&identity)
				if identity != lec.Identity {
					s.logger.Info("leader election: another replica leads", "leader", identity)
					s.setLeader(false)
				}
			},
		},
	})
	if err != nil {
		return err
	}
	for ctx.Err() == nil {
		le.Run(ctx)
	}
	return nil
}
