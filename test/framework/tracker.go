package framework

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

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
	cancel        context.CancelFunc
	done          chan struct{}
}

// TrackPod starts tracking pod p until it is gone, ctx ends or Stop.
func TrackPod(ctx context.Context, c *cluster.Cluster, p *corev1.Pod) *PodTracker {
	pollCtx, cancel := context.WithCancel(ctx)
	tr := &PodTracker{ns: p.Namespace, name: p.Name, uid: string(p.UID), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(tr.done)
		// Until the pod is gone, ctx ends or Stop: its error is only that end. The Get uses
		// ctx, not pollCtx: Stop lets a poll under way finish and record.
		_ = wait.PollUntilContextCancel(pollCtx, 200*time.Millisecond, true, func(context.Context) (bool, error) {
			got, err := c.Client().CoreV1().Pods(tr.ns).Get(ctx, tr.name, metav1.GetOptions{})
			now := time.Now()
			tr.mu.Lock()
			defer tr.mu.Unlock()
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
			return !tr.gone.IsZero(), nil
		})
	}()
	return tr
}

// Evicted returns the first time the pod was seen terminating, Failed or gone.
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

// Snapshot returns what the tracker saw so far; zero times for what it did not see.
func (tr *PodTracker) Snapshot() (terminating, failed, gone time.Time, reason, msg string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.terminating, tr.failed, tr.gone, tr.reason, tr.msg
}

// Stop ends the tracking and waits for the poll under way.
func (tr *PodTracker) Stop() {
	tr.cancel()
	<-tr.done
}
