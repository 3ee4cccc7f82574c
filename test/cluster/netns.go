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
	type result struct {
		conn net.Conn
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		// No UnlockOSThread unless we are back in the original namespace: a locked
		// goroutine that exits takes its thread with it, so a thread stuck in the
		// cluster's namespace can never run other goroutines.
		runtime.LockOSThread()
		conn, err := dialInNetns(ctx, c.netnsPath, network, addr)
		ch <- result{conn, err}
	}()
	r := <-ch
	return r.conn, r.err
}

func dialInNetns(ctx context.Context, nsPath, network, addr string) (net.Conn, error) {
	orig, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
	if err != nil {
		return nil, err
	}
	defer orig.Close()
	target, err := os.Open(nsPath)
	if err != nil {
		return nil, fmt.Errorf("open netns: %w", err)
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		return nil, fmt.Errorf("setns %s: %w", nsPath, err)
	}
	var d net.Dialer
	conn, dialErr := d.DialContext(ctx, network, addr)
	if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err == nil {
		runtime.UnlockOSThread()
	}
	return conn, dialErr
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
