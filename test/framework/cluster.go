package framework

import (
	"context"
	"time"

	"github.com/emptydir-guard/emptydir-guard/test/cluster"
)

// SharedClusterOptions is the cluster most e2e tests share and the demo runs on: the kubelet
// enforces no sizeLimit (LocalStorageCapacityIsolation=false), so only emptyDir guard acts, and
// refreshes volume stats every 5s. logf receives the harness' progress lines.
func SharedClusterOptions(logf func(format string, args ...any)) cluster.Options {
	return cluster.Options{
		LocalStorageCapacityIsolation: false,
		VolumeStatsAggPeriod:          5 * time.Second,
		Logf:                          logf,
	}
}

// StartCluster starts a cluster of the test's own with opts, and stops it when the test ends.
func StartCluster(ctx context.Context, t TB, opts cluster.Options) *cluster.Cluster {
	t.Helper()
	c, err := cluster.Start(ctx, opts)
	if err != nil {
		t.Fatalf("cluster: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("cluster stop: %v", err)
		}
	})
	return c
}
