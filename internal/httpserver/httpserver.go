// Package httpserver builds and serves the HTTP servers of the project's commands: one place
// for the connection limits every listener needs (timeouts, header size, the number of open
// connections), each command choosing its own values.
package httpserver

import (
	"log/slog"
	"net/http"
	"time"
)

// Timeouts bound how long one connection may hold a server, so that slow or idle clients
// cannot pile up connections.
type Timeouts struct {
	ReadHeader, Read, Write, Idle time.Duration
}

// New is a server for h with timeouts t and request headers limited to maxHeaderBytes
// (net/http's default, 1 MiB, is far more than any of our clients send); its own errors go
// to logger at level error. ListenAndServe adds TLS and auth from --web.config.file.
func New(h http.Handler, t Timeouts, maxHeaderBytes int, logger *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: t.ReadHeader,
		ReadTimeout:       t.Read,
		WriteTimeout:      t.Write,
		IdleTimeout:       t.Idle,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelError),
	}
}
