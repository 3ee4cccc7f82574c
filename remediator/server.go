// Package remediator turns Alertmanager "emptyDir over its limit" webhooks into safe
// evictions: it re-checks every alert against the pod's current UID and sizeLimit and a live
// measurement, applies policy, and evicts through the policy/v1 Eviction API so that
// PodDisruptionBudgets hold. See docs/remediator.md.
package remediator

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"

	"github.com/emptydir-guard/emptydir-guard/internal/noticeapi"
)

// Component is the Events' reporting controller and the field manager name.
const Component = "emptydir-remediator"

// Server handles Alertmanager webhooks. Create it with New; serve Handler.
type Server struct {
	cfg      Config
	client   kubernetes.Interface
	measurer LiveMeasurer
	logger   *slog.Logger
	recorder events.EventRecorder
	stopRec  func()
	now      func() time.Time
	reg      *prometheus.Registry
	metrics  *metrics
	ledger   *ledger
	locks    keyedMutex
	// measurements keeps fresh live measurements for the retries of refused evictions.
	measurements *measurementCache
	// blocked keeps the over-limit measurements of pods whose eviction a PodDisruptionBudget
	// refused, for up to blockedReuseMaxAge (answerStillBlocked).
	blocked *measurementCache
	// bearerFile is Config.BearerTokenFile, re-read when it is rotated.
	bearerFile *tokenFile

	ledgerStore ledgerStore
	stopLedger  chan struct{} // ends the ledger ConfigMap's watch

	electionMu   sync.Mutex                  // serializes the leader election callbacks
	leader       atomic.Bool                 // this replica may act
	leaderKnown  atomic.Bool                 // leader election has told who leads
	identity     atomic.Pointer[string]      // this replica's leader election identity
	leaderID     atomic.Pointer[string]      // the identity leader election last reported leading
	leaseTiming  atomic.Pointer[leaseTiming] // of the running leader election
	leaseRenewed atomic.Int64                // unix ns: start of this replica's last write of the Lease as holder
	forward      *forwarder                  // hands a standby's webhooks to the leader; nil: off
	notices      *noticeGate                 // the exporters' notices; nil: off
}

// Option changes how New builds a Server.
type Option func(*Server)

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(s *Server) { s.logger = l } }

// WithEventRecorder sets the recorder for the Events on pods (default: one that posts
// events.k8s.io/v1 Events through the client).
func WithEventRecorder(r events.EventRecorder) Option { return func(s *Server) { s.recorder = r } }

// WithClock sets the clock used for cooldowns and caps (default time.Now).
func WithClock(now func() time.Time) Option { return func(s *Server) { s.now = now } }

// WithLedgerConfigMap keeps the eviction ledger (caps, cooldowns, duplicates) in the named
// ConfigMap, shared by every replica and kept across restarts (default: in memory only).
func WithLedgerConfigMap(namespace, name string) Option {
	return func(s *Server) { s.ledgerStore = &configMapStore{client: s.client, namespace: namespace, name: name} }
}

// WithRegistry sets the registry the metrics are registered in (default: a new registry
// with the Go and process collectors and build_info). Handler serves it on /metrics.
func WithRegistry(reg *prometheus.Registry) Option { return func(s *Server) { s.reg = reg } }

// New returns a Server that evicts through client after measuring with measurer.
func New(cfg Config, client kubernetes.Interface, measurer LiveMeasurer, opts ...Option) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid remediator configuration: %w", err)
	}
	if client == nil {
		return nil, errors.New("remediator needs a Kubernetes client")
	}
	if measurer == nil {
		return nil, errors.New("remediator needs a live measurer")
	}
	s := &Server{cfg: cfg, client: client, measurer: measurer, now: time.Now}
	for _, o := range opts {
		o(s)
	}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case cfg.BearerTokenFile != "":
		tf, err := loadTokenFile(cfg.BearerTokenFile, s.logger)
		if err != nil {
			return nil, err
		}
		s.bearerFile = tf
	case cfg.BearerToken == "":
		s.logger.Warn("the webhook requires no bearer token: whoever reaches it can make the remediator evict pods, "+
			"unless the web configuration requires basic auth or client certificates", "webhook_path", cfg.WebhookPath)
	}
	if s.reg == nil {
		s.reg = newRegistry()
	}
	s.metrics = newMetrics(s.reg)
	s.notices = newNoticeGate(cfg.Notices, s)
	s.measurements = newMeasurementCache(cfg.MaxMeasurementAge)
	s.blocked = newMeasurementCache(max(blockedReuseMaxAge, cfg.MaxMeasurementAge))
	if s.recorder == nil {
		// events.k8s.io/v1: eventTime to the microsecond (core/v1 timestamps are cut to the
		// second), and repeats of one reason on one pod become a series, not new Events.
		b := events.NewBroadcaster(&events.EventSinkImpl{Interface: client.EventsV1()})
		ctx, cancel := context.WithCancel(context.Background())
		if err := b.StartRecordingToSinkWithContext(ctx); err != nil {
			cancel()
			return nil, fmt.Errorf("starting the Event recorder: %w", err)
		}
		s.recorder = b.NewRecorder(scheme.Scheme, Component)
		s.stopRec = func() { cancel(); b.Shutdown() }
	}
	switch store := s.ledgerStore.(type) {
	case nil:
		s.ledgerStore = &memoryStore{}
	case *configMapStore:
		store.observe = func(op, result string) { s.metrics.ledgerOps.WithLabelValues(op, result).Inc() }
		s.stopLedger = make(chan struct{})
		store.start(s.stopLedger)
	}
	s.ledger = newLedger(s.ledgerStore, cfg.Cooldown, cfg.Caps.Window)
	s.ledger.inProgress = cfg.AlertTimeout + ledgerWriteTimeout
	if !cfg.LeaderElection {
		s.leader.Store(true)
		s.leaderKnown.Store(true)
		s.metrics.isLeader.Set(1)
	}
	return s, nil
}

// Close stops the event broadcaster New started, flushing what it can, and the ledger's watch.
func (s *Server) Close() {
	if s.stopLedger != nil {
		close(s.stopLedger)
		s.stopLedger = nil
	}
	if s.stopRec != nil {
		s.stopRec()
	}
}

// Registry returns the registry served on /metrics.
func (s *Server) Registry() *prometheus.Registry { return s.reg }

// IsLeader reports whether this replica acts on webhooks.
func (s *Server) IsLeader() bool { return s.leader.Load() }

// setLeader records the leader election state.
func (s *Server) setLeader(leading bool) {
	s.leader.Store(leading)
	s.leaderKnown.Store(true)
	if leading {
		s.metrics.isLeader.Set(1)
	} else {
		s.metrics.isLeader.Set(0)
	}
}

// Handler returns the HTTP handler: POST {WebhookPath}, POST noticeapi.Path (with
// Config.Notices.ServiceAccount), GET /healthz, /readyz, /metrics.
// Put exporter-toolkit's web config (TLS, basic auth) in front of it, as the command does.
func (s *Server) Handler() http.Handler {
	r := chi.NewRouter()
	webhook := promhttp.InstrumentHandlerDuration(s.metrics.webhookDuration,
		promhttp.InstrumentHandlerCounter(s.metrics.webhookRequests,
			s.requireBearer(http.HandlerFunc(s.serveWebhook))))
	r.Method(http.MethodPost, s.cfg.WebhookPath, webhook)
	if s.notices != nil {
		r.Method(http.MethodPost, noticeapi.Path, http.HandlerFunc(s.serveNotice))
	}
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	r.Get("/readyz", s.serveReady)
	r.Method(http.MethodGet, "/metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{
		Registry:          s.reg,
		ErrorLog:          slog.NewLogLogger(s.logger.Handler(), slog.LevelError),
		EnableOpenMetrics: true,
	}))
	return r
}

// serveReady answers 200 once this replica knows whether it leads (at once without leader
// election) and 503 before. Standby replicas are ready: they answer webhooks with 503 so that
// Alertmanager retries, and take over when the leader goes.
func (s *Server) serveReady(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if !s.leaderKnown.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte("leader election state not known yet\n"))
		return
	}
	if s.leader.Load() {
		_, _ = w.Write([]byte("ok: leader\n"))
		return
	}
	_, _ = w.Write([]byte("ok: standby\n"))
}

// requireBearer rejects requests without the configured bearer token with 401. A token
// file is checked for rotation on each request.
func (s *Server) requireBearer(next http.Handler) http.Handler {
	if s.cfg.BearerToken == "" && s.bearerFile == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		want := []byte(s.cfg.BearerToken)
		if s.bearerFile != nil {
			want = s.bearerFile.current()
		}
		got, ok := bearerToken(r.Header.Get("Authorization"))
		if !ok || subtle.ConstantTimeCompare([]byte(got), want) != 1 {
			s.logger.Warn("webhook request rejected", "reason", "unauthenticated", "remote", r.RemoteAddr, "has_authorization", ok)
			w.Header().Set("WWW-Authenticate", `Bearer realm="emptydir-remediator"`)
			writeJSON(w, http.StatusUnauthorized, WebhookResponse{Status: "error", Error: "missing or wrong bearer token"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

func bearerToken(header string) (string, bool) {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
