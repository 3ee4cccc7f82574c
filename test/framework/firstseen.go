package framework

import (
	"context"
	"sync"
	"time"

	"github.com/emptydir-guard/emptydir-guard/test/cluster"
)

// FirstSeen polls a source every interval and records, per key, when a poll first listed it.
type FirstSeen struct {
	mu    sync.Mutex
	first map[string]time.Time
	stop  chan struct{}
	done  chan struct{}
}

// PollFirstSeen calls list every interval until ctx ends or Stop; a failed poll records nothing.
func PollFirstSeen(ctx context.Context, interval time.Duration, list func(context.Context) ([]string, error)) *FirstSeen {
	w := &FirstSeen{first: map[string]time.Time{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			keys, err := list(ctx)
			now := time.Now()
			if err == nil {
				w.mu.Lock()
				for _, k := range keys {
					if k != "" && w.first[k].IsZero() {
						w.first[k] = now
					}
				}
				w.mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-w.stop:
				return
			case <-time.After(interval):
			}
		}
	}()
	return w
}

// at returns when key was first seen; zero when never.
func (w *FirstSeen) At(key string) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.first[key]
}

func (w *FirstSeen) Stop() { close(w.stop); <-w.done }

// WatchAlertmanager records when Alertmanager first held EmptyDirOverLimit, per UID.
func WatchAlertmanager(ctx context.Context, mon *cluster.Monitoring) *FirstSeen {
	return PollFirstSeen(ctx, 250*time.Millisecond, func(ctx context.Context) ([]string, error) {
		alerts, err := mon.AlertmanagerAlerts(ctx, `alertname="EmptyDirOverLimit"`)
		uids := make([]string, 0, len(alerts))
		for _, a := range alerts {
			uids = append(uids, a.Labels["uid"])
		}
		return uids, err
	})
}
