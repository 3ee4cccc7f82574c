package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// stateDir records every running cluster with its owner's PID. A test binary that is killed
// outright (SIGKILL, SIGPIPE, go test -timeout) cannot clean up; the next Start, or
// CleanupStale, finds its record and finishes the job. /run is a tmpfs, so records never
// outlive a reboot, like the namespaces and mounts they describe.
const stateDir = "/run/emptydir-guard/clusters"

type stateRecord struct {
	Name       string `json:"name"`
	PID        int    `json:"pid"`
	WorkDir    string `json:"workDir"`
	OwnWorkDir bool   `json:"ownWorkDir"`
	// With a Layout: the cgroup root, containerd's state dir and the directories Start created.
	CgroupName      string   `json:"cgroupName,omitempty"`
	ContainerdState string   `json:"containerdState,omitempty"`
	LayoutCreated   []string `json:"layoutCreated,omitempty"`
}

func (c *Cluster) writeState() error {
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		return err
	}
	b, _ := json.Marshal(stateRecord{Name: c.netnsName, PID: os.Getpid(), WorkDir: c.workDir, OwnWorkDir: c.ownWorkDir,
		CgroupName: c.cgroupName, ContainerdState: c.ctrdState, LayoutCreated: c.layoutCreated})
	return os.WriteFile(filepath.Join(stateDir, c.netnsName+".json"), b, 0o644)
}

func (c *Cluster) removeState() {
	if c.netnsName != "" {
		_ = os.Remove(filepath.Join(stateDir, c.netnsName+".json"))
		_ = os.Remove(stateDir) // only when empty
		_ = os.Remove(filepath.Dir(stateDir))
	}
}

// CleanupStale tears down what clusters of dead test processes left behind (processes,
// mounts, cgroups, namespaces, work dirs). Clusters whose owner still runs are left alone.
// It returns the names of the clusters it cleaned.
func CleanupStale(logf func(format string, args ...any)) ([]string, error) {
	files, _ := filepath.Glob(filepath.Join(stateDir, "*.json"))
	var cleaned []string
	var errs []error
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var r stateRecord
		if err := json.Unmarshal(b, &r); err != nil || r.Name == "" || r.WorkDir == "" {
			continue
		}
		if r.PID > 0 && syscall.Kill(r.PID, 0) == nil {
			if _, err := os.Stat("/proc/" + strconv.Itoa(r.PID)); err == nil {
				continue // owner alive
			}
		}
		c := &Cluster{
			opts:       Options{Logf: logf},
			netnsName:  r.Name,
			netnsPath:  "/run/netns/" + r.Name,
			cgroupName: r.Name,
			workDir:    r.WorkDir,
			ownWorkDir: r.OwnWorkDir,
			ctrdState:  filepath.Join(r.WorkDir, "containerd", "state"),
		}
		if r.CgroupName != "" {
			c.cgroupName = r.CgroupName
		}
		if r.ContainerdState != "" {
			c.ctrdState = r.ContainerdState
		}
		c.layoutCreated = r.LayoutCreated
		c.containerdSock = filepath.Join(r.WorkDir, "containerd", "containerd.sock")
		c.netnsIno, _ = inodeOf(c.netnsPath)
		c.logf("cleaning up stale cluster %s of dead process %d", r.Name, r.PID)
		if err := c.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("stale cluster %s: %w", r.Name, err))
		}
		cleaned = append(cleaned, r.Name)
	}
	return cleaned, errors.Join(errs...)
}
