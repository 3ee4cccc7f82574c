package remediator

import (
	"context"
	"errors"
	"net/http"
)

// serveWebhook decodes an Alertmanager payload and handles each alert on its own.
func (s *Server) serveWebhook(w http.ResponseWriter, r *http.Request) {
	if !s.leader.Load() {
		s.serveStandby(w, r)
		return
	}
	if id := s.ownIdentity(); id != "" {
		w.Header().Set(HeaderHandledBy, id)
	}
	body := http.MaxBytesReader(w, r.Body, s.cfg.MaxRequestBytes)
	p, err := DecodePayload(body, s.cfg.MaxRequestBytes)
	if err != nil {
		var pe *PayloadError
		if !errors.As(err, &pe) {
			pe = &PayloadError{Code: http.StatusBadRequest, Message: err.Error()}
		}
		s.logger.Warn("webhook payload rejected", "code", pe.Code, "err", pe.Error(), "remote", r.RemoteAddr)
		writeJSON(w, pe.Code, WebhookResponse{Status: "error", Error: pe.Message, Problems: pe.Alerts})
		return
	}
	if p.TruncatedAlerts > 0 {
		s.logger.Warn("webhook payload truncated by Alertmanager max_alerts; the rest comes with later notifications",
			"truncated_alerts", p.TruncatedAlerts, "group_key", p.GroupKey, "receiver", p.Receiver)
	}

	results := make([]AlertResult, 0, len(p.Alerts))
	outcomes := make([]Outcome, 0, len(p.Alerts))
	for i, a := range p.Alerts {
		// The alert is handled to the end even when Alertmanager hangs up, so that what was
		// done is recorded (ledger, Event, metrics) before the retry comes.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), s.cfg.AlertTimeout)
		res := s.handleAlert(ctx, i, a)
		cancel()
		results = append(results, res)
		outcomes = append(outcomes, res.Outcome)
	}
	code := StatusCode(outcomes)
	status := "ok"
	if code != http.StatusOK {
		status = "retry"
	}
	writeJSON(w, code, WebhookResponse{Status: status, Alerts: results})
}
