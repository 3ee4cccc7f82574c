package framework

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/emptydir-guard/emptydir-guard/test/monitoring"
)

// FirstSeen polls a source every interval and records, per key, when a poll first listed it.
type FirstSeen struct {
	mu     sync.Mutex
	first  map[string]time.Time
	cancel context.CancelFunc
	done   chan struct{}
}

// PollFirstSeen calls list every interval until ctx ends or Stop; a failed poll records nothing.
func PollFirstSeen(ctx context.Context, interval time.Duration, list func(context.Context) ([]string, error)) *FirstSeen {
	pollCtx, cancel := context.WithCancel(ctx)
	w := &FirstSeen{first: map[string]time.Time{}, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		// list gets ctx, not pollCtx: Stop lets a poll under way finish and record.
		wait.UntilWithContext(pollCtx, func(context.Context) {
			keys, err := list(ctx)
			now := time.Now()
			if err != nil {
				return
			}
			w.mu.Lock()
			defer w.mu.Unlock()
			for _, k := range keys {
				if k != "" && w.first[k].IsZero() {
					w.first[k] = now
				}
			}
		}, interval)
	}()
	return w
}

// At returns when key was first seen; zero when never.
func (w *FirstSeen) At(key string) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.first[key]
}

// Stop ends the polling and waits for the poll under way.
func (w *FirstSeen) Stop() { w.cancel(); <-w.done }

// WatchAlertmanager records when Alertmanager first held EmptyDirOverLimit, per UID.
func WatchAlertmanager(ctx context.Context, mon *monitoring.Stack) *FirstSeen {
	return PollFirstSeen(ctx, 250*time.Millisecond, func(ctx context.Context) ([]string, error) {
		alerts, err := mon.AlertmanagerAlerts(ctx, `alertname="EmptyDirOverLimit"`)
		uids := make([]string, 0, len(alerts))
		for _, a := range alerts {
			uids = append(uids, a.Labels["uid"])
		}
		return uids, err
	})
}
