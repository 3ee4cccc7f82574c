package main

import (
	"log/slog"
	"net/http"
	"time"
)

// The HTTP server's timeouts, derived from --web.alert-timeout.
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
)

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

// newHTTPServer is the webhook server with the timeouts above.
func newHTTPServer(h http.Handler, alertTimeout time.Duration, logger *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout(alertTimeout),
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelError),
	}
}
