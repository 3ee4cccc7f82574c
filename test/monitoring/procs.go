package monitoring

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/emptydir-guard/emptydir-guard/test/cluster"
)

// processes are the Prometheus and Alertmanager processes of one stack, started inside the
// cluster's namespace and tracked by it (so Cluster.Stop ends whatever Stop did not).
type processes struct {
	c     *cluster.Cluster
	procs []*exec.Cmd
}

// start runs bin inside the namespace, its output in the cluster's log name.
func (p *processes) start(name, bin string, args ...string) error {
	cmd := p.c.Command(context.Background(), bin, args...)
	if err := p.c.StartProcess(name, cmd); err != nil {
		return err
	}
	p.procs = append(p.procs, cmd)
	return nil
}

// startIsolated runs bin like start, in a mount namespace of its own where setup (a shell
// script: mounts) runs first, so that files can sit at the paths a pod would have without
// touching the host's. env is added to the test's environment.
func (p *processes) startIsolated(name, bin string, args, env []string, setup string) error {
	script := setup + ` && exec "$@"`
	full := append([]string{"--mount", "--propagation", "private", "--", "sh", "-c", script, name, bin}, args...)
	cmd := p.c.Command(context.Background(), "unshare", full...)
	cmd.Env = append(os.Environ(), env...)
	if err := p.c.StartProcess(name, cmd); err != nil {
		return err
	}
	p.procs = append(p.procs, cmd)
	return nil
}

// stop sends SIGTERM to each process group and SIGKILL to those still there after 5s, so
// that the next stack can use the same addresses. Idempotent.
func (p *processes) stop() {
	for _, cmd := range p.procs {
		if cmd.Process == nil {
			continue
		}
		pid := cmd.Process.Pid
		_ = syscall.Kill(-pid, syscall.SIGTERM)
		// The harness reaps the process; once it has, the pid no longer exists.
		gone := func(context.Context) (bool, error) { return syscall.Kill(pid, 0) != nil, nil }
		if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 5*time.Second, true, gone); err != nil {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
	}
	p.procs = nil
}

// waitReady polls url (a /-/ready endpoint) until it answers 200 or ctx ends.
func waitReady(ctx context.Context, client *http.Client, url string) error {
	var last error
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		last = getOK(ctx, client, url)
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("%w (last: %w)", err, last)
	}
	return nil
}

func getOK(ctx context.Context, client *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}
