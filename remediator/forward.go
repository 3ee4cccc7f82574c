package remediator

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Headers of a webhook delivery between replicas.
const (
	// HeaderHandledBy names the replica (its leader election identity) that handled a
	// webhook as leader.
	HeaderHandledBy = "X-Emptydir-Remediator-Handled-By"
	// HeaderForwardedBy names the standby that forwarded a webhook to the leader. A
	// request that carries it is never forwarded again (no loops while leadership moves).
	HeaderForwardedBy = "X-Emptydir-Remediator-Forwarded-By"
)

// LeaderResolver finds where the replica with a leader election identity serves.
type LeaderResolver interface {
	// LeaderURL returns the base URL (scheme://host:port) of the replica identity.
	LeaderURL(ctx context.Context, identity string) (string, error)
}

// PodLeaderResolver resolves an identity that is the replica's pod name (the Deployment's
// default) to the pod's IP and its container port named PortName.
type PodLeaderResolver struct {
	Client    kubernetes.Interface
	Namespace string
	PortName  string
	Scheme    string // default http
}

// LeaderURL implements LeaderResolver.
func (r PodLeaderResolver) LeaderURL(ctx context.Context, identity string) (string, error) {
	pod, err := r.Client.CoreV1().Pods(r.Namespace).Get(ctx, identity, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("getting the leader's pod %s/%s: %w", r.Namespace, identity, err)
	}
	if pod.Status.PodIP == "" || pod.DeletionTimestamp != nil {
		return "", fmt.Errorf("leader pod %s/%s has no IP or is terminating", r.Namespace, identity)
	}
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name == r.PortName {
				scheme := r.Scheme
				if scheme == "" {
					scheme = "http"
				}
				return scheme + "://" + net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(int(p.ContainerPort))), nil
			}
		}
	}
	return "", fmt.Errorf("leader pod %s/%s has no container port named %q", r.Namespace, identity, r.PortName)
}

// WithLeaderForwarding makes a standby hand each webhook to the leader and return the
// leader's answer, so that no delivery depends on which replica the Service picked.
// Without it (and when forwarding fails) a standby answers 503 and closes the connection.
func WithLeaderForwarding(resolver LeaderResolver, client *http.Client) Option {
	return func(s *Server) { s.forward = &forwarder{resolver: resolver, client: client} }
}

// forwarder remembers the URL of the last leader it resolved.
type forwarder struct {
	resolver LeaderResolver
	client   *http.Client

	mu       sync.Mutex
	identity string
	url      string
}

func (f *forwarder) leaderURL(ctx context.Context, identity string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.identity == identity && f.url != "" {
		return f.url, nil
	}
	u, err := f.resolver.LeaderURL(ctx, identity)
	if err != nil {
		return "", err
	}
	f.identity, f.url = identity, u
	return u, nil
}

func (f *forwarder) forget() {
	f.mu.Lock()
	f.identity, f.url = "", ""
	f.mu.Unlock()
}

// serveStandby answers a webhook this replica may not act on: it forwards it to the leader
// when it can, or answers 503 with Connection: close, so that Alertmanager's retry opens a new
// connection, which the Service may send to the leader. (A kept-alive connection would carry
// every retry to this standby again.)
func (s *Server) serveStandby(w http.ResponseWriter, r *http.Request) {
	leader := s.currentLeader()
	err := s.forwardToLeader(w, r, leader)
	if err == nil {
		s.metrics.standby.WithLabelValues(StandbyForwarded).Inc()
		return
	}
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		writeJSON(w, http.StatusRequestEntityTooLarge, WebhookResponse{Status: "error", Error: fmt.Sprintf("request body over %d bytes", s.cfg.MaxRequestBytes)})
		return
	}
	s.logger.Warn("webhook not handled: this replica is a standby", "leader", leader, "reason", err, "remote", r.RemoteAddr)
	s.metrics.standby.WithLabelValues(StandbyRefused).Inc()
	w.Header().Set("Connection", "close")
	w.Header().Set("Retry-After", "5")
	writeJSON(w, http.StatusServiceUnavailable, WebhookResponse{Status: "error", Error: "this replica is not the leader; retry"})
}

var errNoForward = errors.New("not forwarded")

// forwardToLeader sends the webhook to leader and copies its answer. It returns an error,
// with nothing written, when the request cannot be forwarded.
func (s *Server) forwardToLeader(w http.ResponseWriter, r *http.Request, leader string) error {
	switch {
	case s.forward == nil:
		return fmt.Errorf("%w: forwarding to the leader is off", errNoForward)
	case r.Header.Get(HeaderForwardedBy) != "":
		return fmt.Errorf("%w: already forwarded by %s", errNoForward, r.Header.Get(HeaderForwardedBy))
	case leader == "" || leader == s.ownIdentity():
		return fmt.Errorf("%w: no other replica leads", errNoForward)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxRequestBytes))
	if err != nil {
		return fmt.Errorf("reading the webhook body: %w", err)
	}
	base, err := s.forward.leaderURL(r.Context(), leader)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, base+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		return err
	}
	for _, h := range []string{"Content-Type", "Authorization", "User-Agent"} {
		if v := r.Header.Get(h); v != "" {
			req.Header.Set(h, v)
		}
	}
	req.Header.Set(HeaderForwardedBy, s.ownIdentity())
	resp, err := s.forward.client.Do(req)
	if err != nil {
		s.forward.forget()
		return fmt.Errorf("forwarding to the leader %s: %w", leader, err)
	}
	defer resp.Body.Close()
	for _, h := range []string{"Content-Type", "Retry-After", "WWW-Authenticate", HeaderHandledBy} {
		if v := resp.Header.Get(h); v != "" {
			w.Header().Set(h, v)
		}
	}
	w.Header().Set(HeaderForwardedBy, s.ownIdentity())
	w.WriteHeader(resp.StatusCode)
	if _, err := io.Copy(w, resp.Body); err != nil {
		s.logger.Warn("copying the leader's answer failed", "leader", leader, "err", err)
	}
	s.logger.Debug("webhook forwarded to the leader", "leader", leader, "code", resp.StatusCode)
	return nil
}

// currentLeader is the identity leader election last reported as leading.
func (s *Server) currentLeader() string {
	if p := s.leaderID.Load(); p != nil {
		return *p
	}
	return ""
}

// ownIdentity is this replica's leader election identity, "" without leader election.
func (s *Server) ownIdentity() string {
	if p := s.identity.Load(); p != nil {
		return *p
	}
	return ""
}
