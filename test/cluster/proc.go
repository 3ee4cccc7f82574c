package cluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// proc is one long-running component. Its output goes to a log file in the work dir so a
// failure can quote the tail and a human can read the rest.
type proc struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	logFile *os.File
	done    chan struct{}
	err     error
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// diedError describes an exited component with the end of its log, because "exit status 1"
// alone never tells why.
func (p *proc) diedError() error {
	return fmt.Errorf("%s exited (%w); last lines of %s:\n%s", p.name, p.err, p.logPath, tailFile(p.logPath, 30))
}

// Command returns a command that runs inside the cluster's network namespace. nsenter is
// used rather than `ip netns exec`, which also remounts /sys and so hides the cgroup mounts
// the kubelet needs.
func (c *Cluster) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	full := append([]string{"--net=" + c.netnsPath, "--", name}, args...)
	if ctx == nil {
		return exec.Command("nsenter", full...)
	}
	return exec.CommandContext(ctx, "nsenter", full...)
}

// StartProcess starts cmd (usually from Command) with its output in WorkDir/logs/NAME.log and
// tracks it, so Stop kills it before the cluster goes away.
func (c *Cluster) StartProcess(name string, cmd *exec.Cmd) error {
	_, err := c.startExtra(name, cmd)
	return err
}

// startExtra is StartProcess returning the process, for a poll that watches it.
func (c *Cluster) startExtra(name string, cmd *exec.Cmd) (*proc, error) {
	p, err := c.startProc(name, cmd)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.extra = append(c.extra, p)
	c.mu.Unlock()
	return p, nil
}

func (c *Cluster) startProc(name string, cmd *exec.Cmd) (*proc, error) {
	logDir := filepath.Join(c.workDir, "logs")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, err
	}
	logPath := filepath.Join(logDir, name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	if cmd.Stdout == nil {
		cmd.Stdout = f
	}
	if cmd.Stderr == nil {
		cmd.Stderr = f
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	// Own process group so Stop can signal helpers a component forks; Pdeathsig so the
	// components do not outlive a test binary that is killed outright.
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, logPath: logPath, logFile: f, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	c.logf("started %s (pid %d), log %s", name, cmd.Process.Pid, logPath)
	return p, nil
}

// stop sends SIGTERM to the process group, then SIGKILL after grace.
func (p *proc) stop(grace time.Duration) {
	if p == nil || p.cmd.Process == nil {
		return
	}
	if p.exited() {
		return
	}
	pid := p.cmd.Process.Pid
	if grace > 0 {
		_ = syscall.Kill(-pid, syscall.SIGTERM)
		select {
		case <-p.done:
			return
		case <-time.After(grace):
		}
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
	}
}

func runCmd(ctx context.Context, name string, args ...string) ([]byte, error) {
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(cctx, name, args...).CombinedOutput()
	return bytes.TrimSpace(out), err
}

// tailFile returns the last n lines of a file, for error messages.
func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
