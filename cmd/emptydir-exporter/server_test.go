package main

import (
	"bufio"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/prometheus/exporter-toolkit/web"

	"github.com/emptydir-guard/emptydir-guard/exporter"
	"github.com/emptydir-guard/emptydir-guard/internal/httpserver"
)

func TestDefaultServerTimeouts(t *testing.T) {
	d := defaultServerTimeouts
	for name, v := range map[string]time.Duration{"readHeader": d.ReadHeader, "read": d.Read, "write": d.Write, "idle": d.Idle} {
		if v <= 0 {
			t.Errorf("%s timeout is %s: a client could hold a connection forever", name, v)
		}
	}
	if d.ReadHeader > d.Read {
		t.Errorf("readHeader %s > read %s: the header timeout would never fire", d.ReadHeader, d.Read)
	}
	if d.Write <= exporter.LiveTimeout {
		t.Errorf("write timeout %s does not outlast the live endpoint's own %s: slow live answers would be cut off",
			d.Write, exporter.LiveTimeout)
	}
}

// slowClient is what a hostile or broken client does once connected.
type slowClient func(t *testing.T, c net.Conn)

// trickle writes prefix, then one byte of filler at a time until the server closes the
// connection: a slowloris (in the headers) or a slow body.
func trickle(prefix, filler string) slowClient {
	return func(t *testing.T, c net.Conn) {
		if _, err := io.WriteString(c, prefix); err != nil {
			t.Errorf("writing %q: %v", prefix, err)
			return
		}
		go func() {
			for {
				if _, err := io.WriteString(c, filler); err != nil {
					return // the server closed the connection
				}
				time.Sleep(10 * time.Millisecond)
			}
		}()
	}
}

// send writes a whole request and then nothing more.
func send(request string) slowClient {
	return func(t *testing.T, c net.Conn) {
		if _, err := io.WriteString(c, request); err != nil {
			t.Errorf("writing %q: %v", request, err)
		}
	}
}

func TestServerClosesSlowClients(t *testing.T) {
	const short, long = 100 * time.Millisecond, time.Hour
	// handler answers like the exporter's own handlers: without reading a body. /slow
	// answers only after its write deadline has passed.
	handler := http.NewServeMux()
	handler.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	handler.HandleFunc("/slow", func(w http.ResponseWriter, _ *http.Request) {
		time.Sleep(10 * short)
		_, _ = w.Write([]byte("too late\n"))
	})

	tests := []struct {
		name string
		// Only the timeout under test is short, so that it alone can close the connection.
		timeouts httpserver.Timeouts
		client   slowClient
		// wantStatus is the status of the response sent before the server closes; 0 is none.
		wantStatus int
	}{
		{"slowloris: headers never end", httpserver.Timeouts{ReadHeader: short, Read: long, Write: long, Idle: long},
			trickle("GET / HTTP/1.1\r\nHost: exporter\r\n", "X-Slow: 1\r\n"), 0},
		// Below the 256 KiB that net/http discards on its own after the handler, so the
		// server waits for the body before it answers, unless ReadTimeout stops it.
		{"slow body", httpserver.Timeouts{ReadHeader: long, Read: short, Write: long, Idle: long},
			trickle("POST / HTTP/1.1\r\nHost: exporter\r\nContent-Length: 200000\r\n\r\n", "x"), http.StatusOK},
		{"idle keep-alive connection", httpserver.Timeouts{ReadHeader: long, Read: long, Write: long, Idle: short},
			send("GET / HTTP/1.1\r\nHost: exporter\r\n\r\n"), http.StatusOK},
		{"response not written in time", httpserver.Timeouts{ReadHeader: long, Read: long, Write: short, Idle: long},
			send("GET /slow HTTP/1.1\r\nHost: exporter\r\n\r\n"), 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			logger := slog.New(slog.DiscardHandler)
			srv := newServer(handler, tc.timeouts, logger)
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			served := make(chan error, 1)
			noConfig := ""
			go func() { served <- web.Serve(l, srv, &web.FlagConfig{WebConfigFile: &noConfig}, logger) }()
			t.Cleanup(func() {
				_ = srv.Close()
				if err := <-served; !errors.Is(err, http.ErrServerClosed) {
					t.Errorf("serve: %v", err)
				}
			})

			c, err := net.Dial("tcp", l.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			tc.client(t, c)

			// A guard far above the timeout under test: reaching it means the server
			// kept the connection, and fails the test instead of hanging it.
			if err := c.SetReadDeadline(time.Now().Add(20 * time.Second)); err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(c)
			status := 0
			if resp, err := http.ReadResponse(br, nil); err == nil {
				status = resp.StatusCode
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			if status != tc.wantStatus {
				t.Errorf("response status %d (0: none), want %d", status, tc.wantStatus)
			}
			_, err = io.Copy(io.Discard, br)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatal("the server kept the connection open")
			}
			// io.Copy returns nil at EOF; a reset (the server closing with unread
			// data) is a close too.
		})
	}
}
