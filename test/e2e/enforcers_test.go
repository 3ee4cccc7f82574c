package e2e

import (
	"context"
	"testing"

	"github.com/emptydir-guard/emptydir-guard/test/cluster"
	"github.com/emptydir-guard/emptydir-guard/test/framework"
)

// twoEnforcers is a cluster of its own whose kubelet enforces sizeLimit at its defaults, with
// the chain of the seed scenario (framework.StartStack) and two namespaces: pods in ours may be evicted
// by emptyDir guard or the kubelet, whichever comes first; kubeletOnly is denied to the
// remediator, so the kubelet enforces there alone.
type twoEnforcers struct {
	c                 *cluster.Cluster
	s                 *framework.Stack
	am                *framework.FirstSeen // when Alertmanager first listed each pod's alert
	ours, kubeletOnly string
}

// startTwoEnforcers starts it, with namespaces named by the prefixes and remediatorArgs added
// to the remediator's flags; everything stops when the test ends.
func startTwoEnforcers(ctx context.Context, t testing.TB, oursPrefix, kubeletOnlyPrefix string, remediatorArgs ...string) *twoEnforcers {
	t.Helper()
	return startTwoEnforcersWith(ctx, t, oursPrefix, kubeletOnlyPrefix, framework.StackOptions{RemediatorArgs: remediatorArgs})
}

// startTwoEnforcersWith is startTwoEnforcers with the stack's options o (the kubelet's namespace
// denied to the remediator before o.RemediatorArgs).
func startTwoEnforcersWith(ctx context.Context, t testing.TB, oursPrefix, kubeletOnlyPrefix string, o framework.StackOptions) *twoEnforcers {
	t.Helper()
	e := &twoEnforcers{c: startIsolatedCluster(ctx, t), ours: oursPrefix + framework.RandSuffix(), kubeletOnly: kubeletOnlyPrefix + framework.RandSuffix()}
	for _, ns := range []string{e.ours, e.kubeletOnly} {
		if err := e.c.EnsureNamespace(ctx, ns); err != nil {
			t.Fatal(err)
		}
	}
	o.RemediatorArgs = append([]string{"--policy.namespace-deny=" + e.kubeletOnly}, o.RemediatorArgs...)
	e.s = framework.StartStack(ctx, t, e.c, o)
	e.am = framework.WatchAlertmanager(ctx, e.s.Mon)
	t.Cleanup(e.am.Stop)
	return e
}
