package httpserver

import (
	"net"
	"sync"
)

// limitListener accepts at most cap(slots) connections at once: Accept waits for a slot
// before taking the next connection from the kernel's backlog, and a connection frees its
// slot when closed. It is x/net's netutil.LimitListener but for one thing net/http needs:
// its connections keep CloseWrite. To refuse a request (431 for oversized headers, 400 for a
// malformed one) net/http writes the answer, half-closes and waits before closing; without
// the half-close the client's unread bytes make the kernel reset the connection and the
// client loses the answer.
type limitListener struct {
	net.Listener
	slots chan struct{}
	done  chan struct{}
	once  sync.Once
}

func newLimitListener(l net.Listener, n int) *limitListener {
	return &limitListener{Listener: l, slots: make(chan struct{}, n), done: make(chan struct{})}
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	release := sync.OnceFunc(func() { <-l.slots })
	if cw, ok := c.(closeWriter); ok {
		return &limitedHalfCloser{limitedConn{c, release}, cw}, nil
	}
	return &limitedConn{c, release}, nil
}

func (l *limitListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

type closeWriter interface{ CloseWrite() error }

type limitedConn struct {
	net.Conn
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.release()
	return err
}

// limitedHalfCloser is a limited connection whose own connection can half-close.
type limitedHalfCloser struct {
	limitedConn
	cw closeWriter
}

func (c *limitedHalfCloser) CloseWrite() error { return c.cw.CloseWrite() }
