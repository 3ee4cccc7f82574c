package remediator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/emptydir-guard/emptydir-guard/internal/noticeapi"
)

// Results of a notice at the gate, before its handling: the result label of notices_total.
const (
	NoticeHandled         = "handled"         // its pod went through the steps of an alert
	NoticeUnauthenticated = "unauthenticated" // no token, or one the TokenReview does not accept (401)
	NoticeForbidden       = "forbidden"       // another ServiceAccount's token, or another node's notice (403)
	NoticeInvalid         = "invalid"         // a body that names no pod part (400)
	NoticeRateLimited     = "rate_limited"    // its namespace's or node's bucket was empty, or too many tokens to review (429)
	NoticeReviewFailed    = "review_failed"   // the TokenReview could not be made (503)
)

// AllNoticeResults lists every result label value of notices_total.
var AllNoticeResults = []string{NoticeHandled, NoticeUnauthenticated, NoticeForbidden, NoticeInvalid, NoticeRateLimited, NoticeReviewFailed}

// noticeGate is the notice endpoint's state: who may post, and how many are handled.
type noticeGate struct {
	reviewer *tokenReviewer
	user     string // the exporter's ServiceAccount, as a TokenReview names it
	limits   *noticeLimits
}

func newNoticeGate(cfg NoticeConfig, s *Server) *noticeGate {
	if cfg.ServiceAccount == "" {
		return nil
	}
	return &noticeGate{
		reviewer: newTokenReviewer(s.client, cfg.Audience, s.now),
		user:     serviceAccountUser(cfg.ServiceAccount),
		limits:   newNoticeLimits(cfg, s.now),
	}
}

// serveNotice takes an exporter's notice that a pod part crossed its limit and handles it as a
// firing alert about that part: it authenticates the exporter, lets a standby forward it, bounds
// the notices per namespace and node, then runs every step of remediate, whose live re-check
// decides. Nothing of the notice but the part it names is used.
func (s *Server) serveNotice(w http.ResponseWriter, r *http.Request) {
	who, ok := s.authenticateNotice(w, r)
	if !ok {
		return
	}
	if !s.leader.Load() {
		s.serveStandby(w, r) // the leader authenticates the forwarded token again
		return
	}
	if id := s.ownIdentity(); id != "" {
		w.Header().Set(HeaderHandledBy, id)
	}
	n, err := decodeNotice(http.MaxBytesReader(w, r.Body, noticeapi.MaxBytes))
	switch {
	case err != nil:
		s.refuseNotice(w, r, http.StatusBadRequest, NoticeInvalid, err.Error())
		return
	case who.node != "" && n.Node != who.node:
		// An exporter speaks for its own node's pods only, where the review names the node.
		s.refuseNotice(w, r, http.StatusForbidden, NoticeForbidden, fmt.Sprintf("a notice from node %q's exporter about node %q", who.node, n.Node))
		return
	}
	if scope := s.notices.limits.allow(n.Node, n.Namespace); scope != "" {
		w.Header().Set("Retry-After", "60")
		s.refuseNotice(w, r, http.StatusTooManyRequests, NoticeRateLimited, "too many notices of this "+scope+"; the alert will follow")
		return
	}
	s.metrics.notices.WithLabelValues(NoticeHandled).Inc()
	s.logger.Debug("notice received", "node", n.Node, "namespace", n.Namespace, "pod", n.Pod, "uid", n.UID, "check", n.Check)
	// Handled to the end even if the exporter hangs up, as a webhook's alerts are.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), s.cfg.AlertTimeout)
	res := s.handle(ctx, 0, noticeAlert(n), viaNotice)
	cancel()
	code := StatusCode([]Outcome{res.Outcome})
	status := "ok"
	if code != http.StatusOK {
		status = "retry"
	}
	writeJSON(w, code, WebhookResponse{Status: status, Alerts: []AlertResult{res}})
}

// authenticateNotice answers 401, 403 or 503 and returns false unless the request carries a
// token of the exporter's ServiceAccount issued for the notice audience.
func (s *Server) authenticateNotice(w http.ResponseWriter, r *http.Request) (caller, bool) {
	token, ok := bearerToken(r.Header.Get("Authorization"))
	if !ok {
		s.refuseNotice(w, r, http.StatusUnauthorized, NoticeUnauthenticated, "missing bearer token")
		return caller{}, false
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	who, err := s.notices.reviewer.review(ctx, token)
	switch {
	case errors.Is(err, errReviewLimited):
		w.Header().Set("Retry-After", "1")
		s.refuseNotice(w, r, http.StatusTooManyRequests, NoticeRateLimited, "too many tokens to review; the alert will follow")
		return caller{}, false
	case err != nil:
		s.logger.Warn("notice not authenticated", "err", err, "remote", r.RemoteAddr)
		w.Header().Set("Retry-After", "5")
		s.refuseNotice(w, r, http.StatusServiceUnavailable, NoticeReviewFailed, "cannot review the token now; retry")
		return caller{}, false
	case !who.authenticated:
		s.refuseNotice(w, r, http.StatusUnauthorized, NoticeUnauthenticated, "token not valid for audience "+s.cfg.Notices.Audience)
		return caller{}, false
	case who.user != s.notices.user:
		s.refuseNotice(w, r, http.StatusForbidden, NoticeForbidden, fmt.Sprintf("%s may not post notices", who.user))
		return caller{}, false
	}
	return who, true
}

// refuseNotice answers a notice that is not handled, counts and logs it.
func (s *Server) refuseNotice(w http.ResponseWriter, r *http.Request, code int, result, msg string) {
	s.metrics.notices.WithLabelValues(result).Inc()
	s.logger.Warn("notice refused", "result", result, "code", code, "message", msg, "remote", r.RemoteAddr)
	if code == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="emptydir-remediator"`)
	}
	writeJSON(w, code, WebhookResponse{Status: "error", Error: msg})
}

// decodeNotice reads one notice and validates it as the alert it stands for.
func decodeNotice(body io.Reader) (noticeapi.Notice, error) {
	var n noticeapi.Notice
	b, err := io.ReadAll(body)
	if err != nil {
		return n, fmt.Errorf("reading the notice: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&n); err != nil {
		return n, fmt.Errorf("invalid notice JSON: %w", err)
	}
	if msgs := validation.IsDNS1123Subdomain(n.Node); len(msgs) > 0 {
		return n, fmt.Errorf("node %q is not a node name", n.Node)
	}
	if n.Check == "" {
		return n, errors.New("a notice names its check")
	}
	if err := validateAlert(noticeAlert(n)); err != nil {
		return n, err
	}
	return n, nil
}

// noticeAlert is the firing alert a notice stands for: the labels the shipped rules give it.
func noticeAlert(n noticeapi.Notice) Alert {
	labels := map[string]string{LabelNamespace: n.Namespace, LabelPod: n.Pod, LabelUID: n.UID, LabelCheck: n.Check}
	switch n.Check {
	case CheckEmptyDir:
		labels[LabelVolume] = n.Volume
	case CheckContainer:
		labels[LabelContainer] = n.Container
	}
	return Alert{Status: StatusFiring, Labels: labels}
}
