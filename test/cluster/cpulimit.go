package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// LimitCPU holds a process (all its threads) to millicores of CPU time with a CFS quota, as
// a container's CPU limit does, or as a busy node that gives a pod no more than its request.
// The cgroup is a child of the cluster's own cgroup (cgroup v1 "cpu" hierarchy, or cgroup v2),
// so Stop removes it too; the returned undo moves nothing back, it removes the cgroup once the
// process has exited.
func (c *Cluster) LimitCPU(pid int, name string, millicores int) (undo func() error, err error) {
	if millicores <= 0 {
		return nil, fmt.Errorf("LimitCPU: %d millicores", millicores)
	}
	const period = 100000 // µs
	quota := strconv.Itoa(millicores * period / 1000)
	var dir string
	var files map[string]string
	switch {
	case exists("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"):
		dir = filepath.Join("/sys/fs/cgroup/cpu", c.cgroupName, name)
		files = map[string]string{"cpu.cfs_period_us": strconv.Itoa(period), "cpu.cfs_quota_us": quota}
	case exists("/sys/fs/cgroup/cgroup.controllers"):
		dir = filepath.Join("/sys/fs/cgroup", c.cgroupName, name)
		files = map[string]string{"cpu.max": quota + " " + strconv.Itoa(period)}
		// A v2 child has cpu.max only when its parent delegates the controller (the kubelet
		// may have done so already; writing it again is harmless).
		_ = os.WriteFile(filepath.Join("/sys/fs/cgroup", c.cgroupName, "cgroup.subtree_control"), []byte("+cpu"), 0o644)
	default:
		return nil, errors.New("LimitCPU: no cgroup v1 cpu hierarchy or cgroup v2 at /sys/fs/cgroup")
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("LimitCPU: %w", err)
	}
	undo = func() error {
		if err := rmdirCgroup(dir, 5*time.Second, nil); err != nil {
			return fmt.Errorf("LimitCPU: %w", err)
		}
		return nil
	}
	for _, f := range []string{"cpu.cfs_period_us", "cpu.cfs_quota_us", "cpu.max"} {
		if v, ok := files[f]; ok {
			if err := os.WriteFile(filepath.Join(dir, f), []byte(v), 0o644); err != nil {
				_ = undo()
				return nil, fmt.Errorf("LimitCPU: %s: %w", f, err)
			}
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
		_ = undo()
		return nil, fmt.Errorf("LimitCPU: move pid %d: %w", pid, err)
	}
	c.logf("pid %d limited to %dm CPU in %s", pid, millicores, dir)
	return undo, nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
