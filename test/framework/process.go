package framework

import (
	"context"
	"os"

	"github.com/emptydir-guard/emptydir-guard/test/cluster"
)

// StartInNetns starts one of the project's commands inside the cluster's network
// namespace; the cluster's Stop (and the test's cleanup) kills it.
func StartInNetns(t TB, c *cluster.Cluster, logName, bin string, args ...string) {
	t.Helper()
	cmd := c.Command(context.Background(), bin, args...)
	if err := c.StartProcess(logName, cmd); err != nil {
		t.Fatalf("starting %s: %v", logName, err)
	}
	t.Cleanup(func() {
		if cmd.Process != nil {
			_ = cmd.Process.Kill()
		}
		if t.Failed() {
			if b, err := os.ReadFile(c.LogPath(logName)); err == nil {
				t.Logf("--- %s log (Tail) ---\n%s", logName, Tail(string(b), 4000))
			}
		}
	})
}

// Tail is the last n bytes of s.
func Tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
