package main

import (
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestRunRejectsBadFlags(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	tests := []struct {
		name string
		args []string
	}{
		{"no node name", []string{}},
		{"unknown --collection.source value", []string{"--node.name=n", "--collection.source=cadvisor"}},
		{"unknown flag", []string{"--node.name=n", "--no-such-flag"}},
		{"interval below 1s", []string{"--node.name=n", "--collection.interval=10ms"}},
		{"kubelet source without URL", []string{"--node.name=n", "--collection.source=kubelet"}},
		{"missing root dir", []string{"--node.name=n", "--kubelet.root-dir=" + missing}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clearEnv(t)
			// Were run to get past the flags, it would serve on this address.
			addr := freeAddr(t)
			args := append([]string{"--web.listen-address=" + addr}, tc.args...)

			done := make(chan int, 1)
			go func() { done <- run(args) }()
			select {
			case code := <-done:
				if code != 2 {
					t.Errorf("run(%q) = %d, want 2 (bad flags)", args, code)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("run(%q) did not return: it started instead of rejecting its flags", args)
			}
			if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
				c.Close()
				t.Errorf("something listens on %s: run started the server", addr)
			}
		})
	}
}

// TestRunGoodFlagsGetsPastValidation shows that exit code 2 above comes from the flag
// checks: with good flags run goes on to start and fails (1) only for want of a cluster.
func TestRunGoodFlagsGetsPastValidation(t *testing.T) {
	clearEnv(t)
	t.Setenv("KUBERNETES_SERVICE_HOST", "") // not in a cluster: in-cluster config fails
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "pods"), 0o755); err != nil {
		t.Fatal(err)
	}

	// --no-fs.deny-writes: run is in-process here, and Landlock would bind the test binary
	// (denywrites' own test checks the restriction, in a child process).
	code := run([]string{"--node.name=n", "--kubelet.root-dir=" + root, "--kubelet.pod-logs-dir=" + t.TempDir(), "--no-fs.deny-writes", "--web.listen-address=" + freeAddr(t)})

	if code != 1 {
		t.Errorf("run = %d, want 1 (flags accepted, no cluster to talk to)", code)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}
