package framework

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/emptydir-guard/emptydir-guard/test/cluster"
)

// PodTracker polls one pod instance and records when it was first seen terminating
// (deletionTimestamp: an Eviction API call or a delete), Failed (the kubelet's own eviction
// sets phase Failed, reason Evicted) or gone.
type PodTracker struct {
	ns, name, uid string
	mu            sync.Mutex
	terminating   time.Time
	failed        time.Time
	gone          time.Time
	reason, msg   string
	stop          chan struct{}
	done          chan struct{}
}

func TrackPod(ctx context.Context, c *cluster.Cluster, p *corev1.Pod) *PodTracker {
	tr := &PodTracker{ns: p.Namespace, name: p.Name, uid: string(p.UID), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(tr.done)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			got, err := c.Client().CoreV1().Pods(tr.ns).Get(ctx, tr.name, metav1.GetOptions{})
			now := time.Now()
			tr.mu.Lock()
			switch {
			case apierrors.IsNotFound(err) || (err == nil && string(got.UID) != tr.uid):
				if tr.gone.IsZero() {
					tr.gone = now
				}
			case err == nil:
				if got.DeletionTimestamp != nil && tr.terminating.IsZero() {
					tr.terminating = now
				}
				if got.Status.Phase == corev1.PodFailed && tr.failed.IsZero() {
					tr.failed, tr.reason, tr.msg = now, got.Status.Reason, got.Status.Message
				}
			}
			finished := !tr.gone.IsZero()
			tr.mu.Unlock()
			if finished {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-tr.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return tr
}

// evicted returns the first time the pod was seen terminating, Failed or gone.
func (tr *PodTracker) Evicted() time.Time {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	first := time.Time{}
	for _, t := range []time.Time{tr.terminating, tr.failed, tr.gone} {
		if !t.IsZero() && (first.IsZero() || t.Before(first)) {
			first = t
		}
	}
	return first
}

func (tr *PodTracker) Snapshot() (terminating, failed, gone time.Time, reason, msg string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.terminating, tr.failed, tr.gone, tr.reason, tr.msg
}

func (tr *PodTracker) Stop() {
	select {
	case <-tr.stop:
	default:
		close(tr.stop)
	}
	<-tr.done
}
