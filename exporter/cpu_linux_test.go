package exporter

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// processCPU is the CPU time, user and system, the test process has spent.
func processCPU(t *testing.T) time.Duration {
	t.Helper()
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
