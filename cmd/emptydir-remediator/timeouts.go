package main

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/emptydir-guard/emptydir-guard/internal/httpserver"
)

// The HTTP server's limits; the write and drain timeouts are derived from --web.alert-timeout.
const (
	readHeaderTimeout = 10 * time.Second
	// readTimeout bounds reading a whole request, body included.
	readTimeout = 30 * time.Second
	// slowAlertsPerPayload is how many alerts of one payload may each take the whole
	// --web.alert-timeout and still get their answer. With the documented grouping (one pod
	// volume per group, docs/alerting.md) a payload holds one alert; ten leave room for
	// coarser routes.
	slowAlertsPerPayload = 10
	// drainGrace is what a shutdown gives an in-flight webhook beyond its alert's time to
	// write its answer.
	drainGrace = 5 * time.Second
	// idleTimeout keeps an idle keep-alive connection longer than Alertmanager keeps it
	// (its webhook client closes idle connections after 5 minutes): Alertmanager closes
	// first, so a webhook is never written into a connection the server is closing, a POST
	// Go's transport would not retry. Without it net/http would use readTimeout (30s) and
	// most notifications, group_interval apart, would open a new connection and handshake.
	idleTimeout = 6 * time.Minute
	// maxHeaderBytes is far above what Alertmanager sends (a few hundred bytes plus an
	// Authorization header: basic auth or a bearer token of a few KiB) and far below
	// net/http's 1 MiB default, which any client could make the server buffer per request.
	maxHeaderBytes = 16 << 10
	// maxConnections: Alertmanager (a few per replica), Prometheus, probes and a standby
	// forwarding need a handful; each may hold a webhook body of --web.max-request-size
	// (1 MiB), so 64 of them stay well within the container's 128Mi.
	maxConnections = 64
)

// defaultServerTimeouts are the production timeouts of the webhook server for alerts of at
// most alertTimeout.
func defaultServerTimeouts(alertTimeout time.Duration) httpserver.Timeouts {
	return httpserver.Timeouts{ReadHeader: readHeaderTimeout, Read: readTimeout, Write: writeTimeout(alertTimeout), Idle: idleTimeout}
}

// writeTimeout bounds one webhook request from the end of its headers (where net/http starts
// WriteTimeout) to the end of its answer: reading the body, then the alerts of the payload one
// after the other, each within alertTimeout (which holds the --measurement.timeout of its live
// walk). A larger payload that is that slow loses its answer (the connection is closed);
// Alertmanager then retries, and what was done is not done twice (the ledger), so nothing is
// lost but time.
func writeTimeout(alertTimeout time.Duration) time.Duration {
	return readTimeout + slowAlertsPerPayload*alertTimeout
}

// drainTimeout is how long a shutdown waits for in-flight webhooks: one alert at its slowest.
func drainTimeout(alertTimeout time.Duration) time.Duration {
	return alertTimeout + drainGrace
}

// newHTTPServer is the webhook server with timeouts t and the header limit above.
func newHTTPServer(h http.Handler, t httpserver.Timeouts, logger *slog.Logger) *http.Server {
	return httpserver.New(h, t, maxHeaderBytes, logger)
}
