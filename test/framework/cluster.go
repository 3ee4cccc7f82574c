package framework

import (
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
