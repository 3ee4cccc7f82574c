// Package notify tells the remediator at once when a part of a pod first crosses its limit, so
// that its eviction need not wait for a scrape, the rules, Alertmanager's group_wait and the
// webhook (docs/performance.md, "Every race, stage by stage"). A notice names the part, nothing
// more: the remediator re-measures it live before it does anything. Alertmanager's path stays,
// for what a notice missed (a full queue, a remediator away) and for routing and silences.
package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/emptydir-guard/emptydir-guard/internal/noticeapi"
)

// Reasons a notice was not delivered: the reason label of emptydir_exporter_notices_failed_total.
const (
	FailedQueueFull = "queue_full" // more crossings at once than the queue holds: dropped
	FailedRefused   = "refused"    // the remediator answered 4xx (unauthenticated, rate-limited, ...): not retried
	FailedRetries   = "retries"    // unreachable or 5xx on every attempt
)

// workers send notices at once: a remediator slow on one (a live walk of a big volume) does not
// hold the others up.
const workers = 2

// Config is how notices are sent. DefaultConfig gives the defaults.
type Config struct {
	// URL is the remediator's base URL (scheme://host:port); its notice endpoint is below it.
	URL string
	// TokenFile holds the bearer token (the exporter's ServiceAccount token projected for
	// noticeapi.Audience), read again for every notice, as the kubelet rotates it.
	TokenFile string
	// Node is the exporter's node: every notice names it, and its metrics carry it.
	Node string
	// Client sends the notices; its timeout bounds one attempt. nil: one with a timeout of
	// AttemptTimeout.
	Client *http.Client
	// QueueSize bounds the notices waiting; beyond it they are dropped (FailedQueueFull).
	QueueSize int
	// Attempts bounds the tries of one notice; Backoff is the wait after the first failed one,
	// doubled after each.
	Attempts int
	Backoff  time.Duration
	Logger   *slog.Logger
}

// AttemptTimeout is above the remediator's --web.alert-timeout (45 s), which a notice's
// handling takes at most.
const AttemptTimeout = 50 * time.Second

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{QueueSize: 64, Attempts: 4, Backoff: time.Second}
}

// Notifier keeps which parts are over their limits, queues a notice for each one that crossed
// since the last cycle, and sends them.
type Notifier struct {
	cfg   Config
	url   string
	queue chan noticeapi.Notice

	mu   sync.Mutex
	over map[noticeapi.Notice]bool // the parts over their limits at the last Observe
	// crossed are the parts Crossed told of since the last Observe, whose snapshot may predate
	// their walk: kept over until the Observe after it.
	crossed map[noticeapi.Notice]bool

	sent   prometheus.Counter
	failed *prometheus.CounterVec
}

// New checks cfg and returns a Notifier; Run sends what Observe queues.
func New(cfg Config) (*Notifier, error) {
	u, err := noticeapi.URL(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("--remediator.url: %w", err)
	}
	if cfg.TokenFile == "" {
		return nil, errors.New("--remediator.token-file is required with --remediator.url: the remediator hears no notice without it")
	}
	if cfg.QueueSize < 1 || cfg.Attempts < 1 || cfg.Backoff <= 0 {
		return nil, fmt.Errorf("notifier: queue size %d, attempts %d and backoff %s must be positive", cfg.QueueSize, cfg.Attempts, cfg.Backoff)
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: AttemptTimeout}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	labels := prometheus.Labels{"node": cfg.Node}
	n := &Notifier{cfg: cfg, url: u.String(), queue: make(chan noticeapi.Notice, cfg.QueueSize),
		over: map[noticeapi.Notice]bool{}, crossed: map[noticeapi.Notice]bool{},
		sent: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "emptydir_exporter_notices_sent_total", ConstLabels: labels,
			Help: "Notices of a part over its limit that the remediator took.",
		}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "emptydir_exporter_notices_failed_total", ConstLabels: labels,
			Help: "Notices of a part over its limit not delivered, by reason.",
		}, []string{"reason"}),
	}
	for _, r := range []string{FailedQueueFull, FailedRefused, FailedRetries} {
		n.failed.WithLabelValues(r)
	}
	return n, nil
}

// Collectors are the notifier's metrics.
func (n *Notifier) Collectors() []prometheus.Collector {
	return []prometheus.Collector{n.sent, n.failed}
}

// Observe takes the parts over their limits at a cycle's end and queues a notice for each
// that was not over at the last call, nor told by Crossed since: once per crossing, not once
// per cycle. It never blocks: a notice the queue has no room for is dropped, and its part left
// to the alert.
func (n *Notifier) Observe(over []noticeapi.Notice) {
	now := make(map[noticeapi.Notice]bool, len(over))
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, p := range over {
		now[p] = true
		if !n.over[p] {
			n.enqueue(p)
		}
	}
	for p := range n.crossed {
		now[p] = true
	}
	n.over, n.crossed = now, map[noticeapi.Notice]bool{}
}

// Crossed queues a notice for p, which one walk has just found over its limit, at once rather
// than at its cycle's end (the cycle ends just before the scrape, up to an interval later);
// once per crossing, as Observe. It never blocks.
func (n *Notifier) Crossed(p noticeapi.Notice) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.over[p] {
		return
	}
	n.over[p], n.crossed[p] = true, true
	n.enqueue(p)
}

// enqueue queues p, or drops it when the queue is full; n.mu is held.
func (n *Notifier) enqueue(p noticeapi.Notice) {
	select {
	case n.queue <- p:
	default:
		n.failed.WithLabelValues(FailedQueueFull).Inc()
		n.cfg.Logger.Warn("notice dropped: the queue is full", "namespace", p.Namespace, "pod", p.Pod, "uid", p.UID, "check", p.Check)
	}
}

// Run sends the queued notices until ctx ends.
func (n *Notifier) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case p := <-n.queue:
					n.deliver(ctx, p)
				}
			}
		})
	}
	wg.Wait()
}

// deliver sends p until the remediator answers 2xx or 4xx, or the attempts are spent.
func (n *Notifier) deliver(ctx context.Context, p noticeapi.Notice) {
	wait := n.cfg.Backoff
	for attempt := 1; ; attempt++ {
		code, err := n.send(ctx, p)
		switch {
		case err == nil && code < 300:
			n.sent.Inc()
			n.cfg.Logger.Debug("notice sent", "namespace", p.Namespace, "pod", p.Pod, "uid", p.UID, "check", p.Check, "code", code)
			return
		case err == nil && code < 500:
			n.failed.WithLabelValues(FailedRefused).Inc()
			n.cfg.Logger.Warn("notice refused by the remediator", "code", code, "namespace", p.Namespace, "pod", p.Pod, "uid", p.UID)
			return
		case attempt >= n.cfg.Attempts || ctx.Err() != nil:
			n.failed.WithLabelValues(FailedRetries).Inc()
			n.cfg.Logger.Warn("notice not delivered", "attempts", attempt, "code", code, "err", err, "namespace", p.Namespace, "pod", p.Pod, "uid", p.UID)
			return
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
		wait *= 2
	}
}

// send posts p once and returns the remediator's status code.
func (n *Notifier) send(ctx context.Context, p noticeapi.Notice) (int, error) {
	token, err := os.ReadFile(n.cfg.TokenFile)
	if err != nil {
		return 0, fmt.Errorf("reading the token: %w", err)
	}
	body, err := json.Marshal(p)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	resp, err := n.cfg.Client.Do(req)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, nil
}
