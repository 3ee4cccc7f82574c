package cluster

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// createNetns makes the namespace the whole cluster lives in. The kubelet refuses a loopback
// node IP and the API server must reach the kubelet by address, so the node needs a real
// interface; a veth pair with both ends inside keeps every packet inside the namespace.
func createNetns(ctx context.Context, name string, nodeIP net.IP) error {
	steps := [][]string{
		{"netns", "add", name},
		{"-n", name, "link", "set", "lo", "up"},
		{"-n", name, "link", "add", "edg0", "type", "veth", "peer", "name", "edg1"},
		{"-n", name, "addr", "add", nodeIP.String() + "/24", "dev", "edg0"},
		{"-n", name, "link", "set", "edg0", "up"},
		{"-n", name, "link", "set", "edg1", "up"},
		// Components that look for "the" host interface follow the default route.
		{"-n", name, "route", "add", "default", "dev", "edg0"},
	}
	for _, s := range steps {
		if out, err := runCmd(ctx, "ip", s...); err != nil {
			return fmt.Errorf("ip %v: %v: %s", s, err, out)
		}
	}
	return nil
}

// DialContext opens a connection from inside the cluster's network namespace while the
// test process itself stays in the host namespace: the socket is created on an OS thread
// that temporarily joins the namespace. Sockets keep the namespace they were created in.
func (c *Cluster) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var conn net.Conn
	var dialErr error
	if err := inNetns(c.netnsPath, func() {
		var d net.Dialer
		conn, dialErr = d.DialContext(ctx, network, addr)
	}); err != nil {
		return nil, err
	}
	return conn, dialErr
}

// inNetns runs fn on an OS thread that has joined the namespace at nsPath, then returns
// the thread to its own namespace. If it cannot return, the thread is never unlocked: a
// locked goroutine that exits takes its thread with it, so a thread stuck in the
// cluster's namespace can never run other goroutines.
func inNetns(nsPath string, fn func()) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			errc <- err
			return
		}
		defer orig.Close()
		target, err := os.Open(nsPath)
		if err != nil {
			errc <- fmt.Errorf("open netns: %w", err)
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns %s: %w", nsPath, err)
			return
		}
		fn()
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err == nil {
			runtime.UnlockOSThread()
		}
		errc <- nil
	}()
	return <-errc
}

// HTTPClient returns a client whose connections start inside the cluster's namespace, so
// tests can talk to the API server, the kubelet or any pod IP from the host.
func (c *Cluster) HTTPClient(tlsConfig *tls.Config) *http.Client {
	return &http.Client{
		Timeout: 60 * time.Second,
		Transport: &http.Transport{
			DialContext:         c.DialContext,
			TLSClientConfig:     tlsConfig,
			TLSHandshakeTimeout: 10 * time.Second,
			MaxIdleConnsPerHost: 4,
			IdleConnTimeout:     30 * time.Second,
		},
	}
}

// Listen opens a listening socket inside the cluster's network namespace, so that test code
// can serve processes that run there (e.g. a recording proxy in front of a webhook).
// Accepted connections belong to that namespace whatever thread serves them.
func (c *Cluster) Listen(network, addr string) (net.Listener, error) {
	var l net.Listener
	var listenErr error
	if err := inNetns(c.netnsPath, func() { l, listenErr = net.Listen(network, addr) }); err != nil {
		return nil, err
	}
	return l, listenErr
}
