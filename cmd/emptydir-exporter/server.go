package main

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/emptydir-guard/emptydir-guard/exporter"
	"github.com/emptydir-guard/emptydir-guard/internal/httpserver"
)

// defaultServerTimeouts are the production values; they bound how long one connection may
// hold the exporter's HTTP server, so that slow or idle clients (any pod the NetworkPolicy
// admits) cannot pile up connections. The requests are GETs without a body,
// so reading one is quick; writing is the long part, because the live endpoint answers only
// after measuring: WriteTimeout runs from the end of the request headers and must outlast
// exporter.LiveTimeout (which bounds the queue wait and the walk together), or a slow but
// honest live answer would be cut off after the work was done.
var defaultServerTimeouts = httpserver.Timeouts{
	ReadHeader: 5 * time.Second,
	Read:       10 * time.Second,
	Write:      exporter.LiveTimeout + 10*time.Second,
	Idle:       time.Minute, // above Prometheus' usual scrape intervals, so scrapes reuse connections
}

// maxHeaderBytes is far above what Prometheus or the remediator send (a few hundred bytes,
// plus basic auth or a bearer token with --web.config.file).
const maxHeaderBytes = 64 << 10

// maxConnections is far above what one node's scrapers and the remediator open, and 128
// connections with full request headers (64 KiB) stay far within the exporter's memory.
const maxConnections = 128

// newServer builds the exporter's HTTP server.
func newServer(handler http.Handler, t httpserver.Timeouts, logger *slog.Logger) *http.Server {
	return httpserver.New(handler, t, maxHeaderBytes, logger)
}
