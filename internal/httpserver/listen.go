package httpserver

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/alecthomas/kingpin/v2"
	"github.com/coreos/go-systemd/v22/activation"
	"github.com/mdlayher/vsock"
	"github.com/prometheus/exporter-toolkit/web"
)

// AddMaxConnectionsFlag adds --web.max-connections to app, defaulting to def.
func AddMaxConnectionsFlag(app *kingpin.Application, def int) *int {
	n := new(int)
	app.Flag("web.max-connections", "Most connections the HTTP server holds open at once, per listen address; further ones wait to be accepted until one closes (0: no limit).").
		Default(strconv.Itoa(def)).IntVar(n)
	return n
}

// ListenAndServe is exporter-toolkit's web.ListenAndServe (listen addresses, systemd socket
// activation, TLS and auth from --web.config.file) with at most maxConns connections open at
// once per listener (0: no limit). net/http has no such bound: every connection costs a
// goroutine and its buffers for as long as its client keeps it.
func ListenAndServe(server *http.Server, flags *web.FlagConfig, maxConns int, logger *slog.Logger) error {
	var listeners []net.Listener
	if flags.WebSystemdSocket != nil && *flags.WebSystemdSocket {
		ls, err := activation.Listeners()
		if err != nil {
			return fmt.Errorf("systemd socket activation: %w", err)
		}
		if len(ls) == 0 {
			return errors.New("no socket activation file descriptors found")
		}
		listeners = ls
	} else {
		if flags.WebListenAddresses == nil || len(*flags.WebListenAddresses) == 0 {
			return errors.New("no listen address given (--web.listen-address)")
		}
		for _, addr := range *flags.WebListenAddresses {
			l, err := listen(addr)
			if err != nil {
				return err
			}
			defer l.Close()
			listeners = append(listeners, l)
		}
	}
	return Serve(listeners, server, flags, maxConns, logger)
}

// listen listens on a TCP address, or on a vsock port given as vsock://:<port>.
func listen(addr string) (net.Listener, error) {
	if !strings.HasPrefix(addr, "vsock://") {
		return net.Listen("tcp", addr)
	}
	u, err := url.Parse(addr)
	if err != nil {
		return nil, err
	}
	_, p, err := net.SplitHostPort(u.Host)
	if err != nil {
		return nil, fmt.Errorf("listen address %s: %w", addr, err)
	}
	port, err := strconv.ParseUint(p, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("listen address %s: %w", addr, err)
	}
	return vsock.Listen(uint32(port), nil)
}

// Serve serves server on listeners as web.ServeMultiple does, with at most maxConns
// connections open at once on each (0: no limit; one listen address is the usual case).
func Serve(listeners []net.Listener, server *http.Server, flags *web.FlagConfig, maxConns int, logger *slog.Logger) error {
	if maxConns > 0 {
		limited := make([]net.Listener, len(listeners))
		for i, l := range listeners {
			limited[i] = newLimitListener(l, maxConns)
		}
		listeners = limited
	}
	return web.ServeMultiple(listeners, server, flags, logger)
}
