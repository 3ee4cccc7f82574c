package httpserver

import (
	"bufio"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/exporter-toolkit/web"
)

// A server limited to 2 connections never holds a third one open, however many clients
// connect: the third waits (in the listen backlog) until one of the first two closes, and
// is then served. Without the limit, each connection costs a goroutine and its buffers for
// as long as its client keeps it (an idle keep-alive connection: minutes).
func TestMaxConnections(t *testing.T) {
	const limit = 2
	srv := New(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }),
		Timeouts{ReadHeader: time.Minute, Read: time.Minute, Write: time.Minute, Idle: time.Hour}, 1<<10, slog.New(slog.DiscardHandler))
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// Counted below the limit: a connection counts from the kernel's accept to its close, which
	// comes before its slot is freed. (net/http's ConnState hooks cannot count it: the server
	// runs StateClosed only after the close has freed the slot and the next one was let in.)
	l := &countingListener{Listener: raw}
	addr := l.Addr().String()
	empty := ""
	flags := &web.FlagConfig{WebListenAddresses: &[]string{}, WebConfigFile: &empty}
	done := make(chan error, 1)
	go func() { done <- Serve([]net.Listener{l}, srv, flags, limit, slog.New(slog.DiscardHandler)) }()
	defer func() {
		_ = srv.Close()
		if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	}()

	// get sends one request on conn and reads the answer; the connection stays open.
	get := func(conn net.Conn) error {
		if _, err := conn.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
			return err
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			return err
		}
		return resp.Body.Close()
	}
	var conns []net.Conn
	for range limit {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := get(c); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	third, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	served := make(chan error, 1)
	go func() { served <- get(third) }()
	// Freeing a slot lets the third in.
	_ = conns[0].Close()
	if err := <-served; err != nil {
		t.Fatalf("third connection after a slot was freed: %v", err)
	}
	if most := l.most(); most > limit {
		t.Errorf("%d connections open at once, limit %d", most, limit)
	} else if most < limit {
		t.Errorf("at most %d connections open at once, want the limit, %d, reached", most, limit)
	}
}

// countingListener counts its open connections and remembers the most at once.
type countingListener struct {
	net.Listener
	mu         sync.Mutex
	open, peak int
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open++
	l.peak = max(l.peak, l.open)
	return &countedConn{Conn: c, l: l}, nil
}

func (l *countingListener) most() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.peak
}

type countedConn struct {
	net.Conn
	l    *countingListener
	once sync.Once
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		defer c.l.mu.Unlock()
		c.l.open--
	})
	return err
}

// CloseWrite keeps the half-close net/http needs (limit.go).
func (c *countedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// A request the server refuses before its handler (headers over the limit) still gets its
// answer through a limited listener: net/http half-closes the connection after answering,
// which a limited connection must allow, or the kernel resets the connection over the
// client's unread bytes and the client sees "connection reset by peer" instead of 431.
func TestRefusalAnsweredThroughLimit(t *testing.T) {
	srv := New(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }),
		Timeouts{ReadHeader: time.Minute, Read: time.Minute, Write: time.Minute, Idle: time.Hour}, 1<<10, slog.New(slog.DiscardHandler))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	empty := ""
	flags := &web.FlagConfig{WebListenAddresses: &[]string{}, WebConfigFile: &empty}
	done := make(chan error, 1)
	go func() { done <- Serve([]net.Listener{l}, srv, flags, 4, slog.New(slog.DiscardHandler)) }()
	defer func() {
		_ = srv.Close()
		if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	}()

	req, err := http.NewRequest(http.MethodGet, "http://"+l.Addr().String()+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Pad", strings.Repeat("x", 64<<10))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("oversized headers: %v, want the 431 answer", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the answer to oversized headers: %v (status %d)", err, resp.StatusCode)
	}
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("oversized headers: %d %s, want 431", resp.StatusCode, body)
	}
}
