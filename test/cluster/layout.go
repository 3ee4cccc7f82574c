package cluster

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Layout puts the node's directories where a distribution has them, at fixed paths of the host
// (a chart preset's, such as k0s's /var/lib/k0s/kubelet), instead of below the work dir: the
// exporter then finds them where the preset says, not where a test's values point. Each directory
// must not exist before Start (never a real runtime's), which creates it and its missing parents
// and Stop removes them, after unmounting everything below; one such cluster runs at a time on
// the host (a lock in stateDir), and a dead test's leftovers are removed by CleanupStale.
type Layout struct {
	KubeletRootDir     string // the kubelet's --root-dir; "": below the work dir
	ContainerdRoot     string // containerd's root; "": below the work dir
	ContainerdStateDir string // containerd's state; "": below the work dir
	PodLogsDir         string // the kubelet's podLogsDir; "": below the work dir
	// CgroupRoot is the kubelet's --cgroup-root (cgroupfs), one level, e.g. /kubelet (kind);
	// "": /<the cluster's name>.
	CgroupRoot string
}

func (l *Layout) dirs() []string {
	var out []string
	for _, d := range []string{l.KubeletRootDir, l.ContainerdRoot, l.ContainerdStateDir, l.PodLogsDir} {
		if d != "" {
			out = append(out, d)
		}
	}
	return out
}

const layoutLock = stateDir + "/layout.lock"

// lockLayout takes the host's one layout lock, waiting for it until ctx is done: two
// clusters on one set of fixed paths would share a kubelet root and a containerd.
func lockLayout(ctx context.Context) (*os.File, error) {
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(layoutLock, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			_ = f.Close()
			return nil, fmt.Errorf("lock %s: %w", layoutLock, err)
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, fmt.Errorf("waiting for %s (another cluster with fixed host paths runs): %w", layoutLock, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// createLayoutDirs creates the layout's directories, none of which may exist, and returns, for
// each, the topmost directory it made (what Stop removes). Only a directory this function's own
// mkdir created is ever returned: a slip here must not hand Stop a directory of the host.
func createLayoutDirs(l *Layout) ([]string, error) {
	var created []string
	for _, d := range l.dirs() {
		if !filepath.IsAbs(d) || filepath.Clean(d) != d || d == "/" {
			return created, fmt.Errorf("layout directory %q: want a clean absolute path", d)
		}
		if _, err := os.Lstat(d); err == nil {
			return created, fmt.Errorf("layout directory %s exists already: a real runtime's, or a leftover; the test never uses (nor removes) a directory it did not create", d)
		}
		var path []string // d and its ancestors, from the top
		for p := d; p != "/"; p = filepath.Dir(p) {
			path = append([]string{p}, path...)
		}
		first := ""
		for _, p := range path {
			err := os.Mkdir(p, 0o755)
			switch {
			case err == nil:
				if first == "" {
					first = p
				}
			case errors.Is(err, fs.ErrExist) && first == "":
				// An ancestor that was there: not ours.
			default:
				if first != "" {
					created = append(created, first)
				}
				return created, fmt.Errorf("creating layout directory %s: %w", p, err)
			}
		}
		created = append(created, first)
	}
	return created, nil
}

// removeLayoutDirs unmounts everything below the created directories and removes them. It
// refuses a directory directly below / (/var, /run, /tmp): no layout directory is made there.
func removeLayoutDirs(created []string) error {
	var errs []error
	for _, top := range created {
		if top == "" || strings.Count(filepath.Clean(top), "/") < 2 {
			errs = append(errs, fmt.Errorf("not removing layout directory %q: too near the root to be one Start made", top))
			continue
		}
		if err := unmountUnder(top); err != nil {
			errs = append(errs, err)
			continue // never remove what a mount still shows below
		}
		if err := os.RemoveAll(top); err != nil {
			errs = append(errs, fmt.Errorf("remove layout directory: %w", err))
		}
	}
	return errors.Join(errs...)
}

// underLayout reports whether path is below one of the cluster's own directories (work dir or
// layout), for the host leftovers that name them.
func (c *Cluster) underLayout(path string) bool {
	for _, d := range append([]string{c.workDir}, c.layoutCreated...) {
		if d != "" && strings.HasPrefix(path, d+"/") {
			return true
		}
	}
	return false
}

// useLayout takes the layout lock and moves the cluster's directories and cgroup root to the
// layout's, creating them (none may exist).
func (c *Cluster) useLayout(ctx context.Context, l *Layout) error {
	var err error
	if c.layoutLock, err = lockLayout(ctx); err != nil {
		return err
	}
	if l.CgroupRoot != "" {
		name := strings.TrimPrefix(l.CgroupRoot, "/")
		if name == "" || strings.Contains(name, "/") {
			return fmt.Errorf("layout cgroup root %q: want one level below /", l.CgroupRoot)
		}
		for _, h := range cgroupHierarchies() {
			if _, err := os.Stat(filepath.Join(h, name)); err == nil {
				return fmt.Errorf("cgroup %s exists already (a real kubelet's, or a leftover): not used", filepath.Join(h, name))
			}
		}
		c.cgroupName = name
	}
	c.layoutCreated, err = createLayoutDirs(l)
	for dst, src := range map[*string]string{&c.kubeletRoot: l.KubeletRootDir, &c.podLogsDir: l.PodLogsDir,
		&c.ctrdRoot: l.ContainerdRoot, &c.ctrdState: l.ContainerdStateDir} {
		if src != "" {
			*dst = src
		}
	}
	return err
}
