package cluster

import (
	"bufio"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/util/wait"
)

func inodeOf(path string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, fmt.Errorf("stat %s: %w", path, err)
	}
	return st.Ino, nil
}

// cgroupHierarchies lists the mount points of all cgroup (v1 and v2) hierarchies.
func cgroupHierarchies() []string {
	var out []string
	for _, m := range readMountinfo() {
		if m.fstype == "cgroup" || m.fstype == "cgroup2" {
			out = append(out, m.mountPoint)
		}
	}
	return out
}

// createCgroups gives the kubelet its own cgroupRoot. Two kubelets sharing /kubepods would
// each delete the other's pod cgroups as orphans, so concurrent test clusters need this.
func (c *Cluster) createCgroups() error {
	for _, h := range cgroupHierarchies() {
		dir := filepath.Join(h, c.cgroupName)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("create cgroup %s: %w", dir, err)
		}
		// A v1 cpuset child is unusable until cpus and mems are set.
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if b, err := os.ReadFile(filepath.Join(h, f)); err == nil {
				if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
					return fmt.Errorf("init %s/%s: %w", dir, f, err)
				}
			}
		}
	}
	return nil
}

func (c *Cluster) removeCgroups() error {
	if c.cgroupName == "" {
		return nil
	}
	var errs []error
	for _, h := range cgroupHierarchies() {
		root := filepath.Join(h, c.cgroupName)
		if _, err := os.Stat(root); err != nil {
			continue
		}
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			if err := rmdirCgroup(d, 2*time.Second, func() { killPidsIn(filepath.Join(d, "cgroup.procs")) }); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// rmdirCgroup removes a cgroup once the processes in it are gone, which takes a moment after
// they were killed: it tries every 100ms until timeout, calling before (if not nil) ahead of
// each try, and on failure reports the last rmdir error.
func rmdirCgroup(dir string, timeout time.Duration, before func()) error {
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		if before != nil {
			before()
		}
		last = unix.Rmdir(dir)
		return last == nil || errors.Is(last, unix.ENOENT), nil
	})
	if err != nil {
		return fmt.Errorf("rmdir cgroup %s: %w (still after %s)", dir, last, timeout)
	}
	return nil
}

func killPidsIn(procsFile string) {
	b, err := os.ReadFile(procsFile)
	if err != nil {
		return
	}
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 1 && pid != os.Getpid() {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// killStragglers SIGKILLs any process that still belongs to this cluster after the orderly
// shutdown: in its network namespace, in its cgroup tree, or a shim of its containerd.
func (c *Cluster) killStragglers() int {
	killed := map[int]bool{}
	// Up to three rounds, 300ms apart, until one finds nothing left to kill: a process may
	// fork while the others are being killed.
	_ = wait.ExponentialBackoff(wait.Backoff{Duration: 300 * time.Millisecond, Steps: 3}, func() (bool, error) {
		n := 0
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == os.Getpid() || pid == 1 {
				continue
			}
			if c.ownsProcess(pid) {
				if syscall.Kill(pid, syscall.SIGKILL) == nil {
					n++
					killed[pid] = true
				}
			}
		}
		return n == 0, nil
	})
	return len(killed)
}

func (c *Cluster) ownsProcess(pid int) bool {
	base := "/proc/" + strconv.Itoa(pid)
	if c.netnsIno != 0 {
		if link, err := os.Readlink(base + "/ns/net"); err == nil && link == fmt.Sprintf("net:[%d]", c.netnsIno) {
			return true
		}
	}
	if c.cgroupName != "" {
		if b, err := os.ReadFile(base + "/cgroup"); err == nil {
			for _, line := range strings.Split(string(b), "\n") {
				if strings.Contains(line, ":/"+c.cgroupName+"/") || strings.HasSuffix(line, ":/"+c.cgroupName) {
					return true
				}
			}
		}
	}
	// Shims live in neither: recognise them by the containerd socket in their arguments.
	// Only shims, so that e.g. a person's `less` of a log in the work dir survives.
	if c.workDir != "" {
		if b, err := os.ReadFile(base + "/cmdline"); err == nil {
			argv := strings.Split(string(b), "\x00")
			if strings.HasPrefix(filepath.Base(argv[0]), "containerd-shim") && strings.Contains(string(b), c.workDir+"/") {
				return true
			}
		}
	}
	return false
}

type mountEntry struct{ mountPoint, fstype string }

func readMountinfo() []mountEntry {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []mountEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 {
			continue
		}
		e := mountEntry{mountPoint: unescapeMount(fields[4])}
		for i, f := range fields {
			if f == "-" && i+1 < len(fields) {
				e.fstype = fields[i+1]
				break
			}
		}
		out = append(out, e)
	}
	return out
}

// unescapeMount decodes mountinfo's octal escapes (\040 for space and so on).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// unmountUnder lazily unmounts every mount at or below dir, deepest first, repeating because
// the kubelet stacks bind mounts on its root dir.
func unmountUnder(dir string) error {
	if dir == "" {
		return nil
	}
	var last []string
	for round := 0; round < 10; round++ {
		var mps []string
		for _, m := range readMountinfo() {
			if m.mountPoint == dir || strings.HasPrefix(m.mountPoint, dir+"/") {
				mps = append(mps, m.mountPoint)
			}
		}
		if len(mps) == 0 {
			return nil
		}
		sort.Slice(mps, func(i, j int) bool {
			return strings.Count(mps[i], "/") > strings.Count(mps[j], "/")
		})
		for _, mp := range mps {
			_ = unix.Unmount(mp, unix.MNT_DETACH)
		}
		last = mps
	}
	return fmt.Errorf("mounts left under %s: %v", dir, last)
}

func listCNINetns() map[string]bool {
	out := map[string]bool{}
	matches, _ := filepath.Glob("/run/netns/cni-*")
	for _, m := range matches {
		out[m] = true
	}
	return out
}

// removeNewCNINetns deletes /run/netns/cni-* namespaces created during this run that no
// process uses any more. With netns_mounts_under_state_dir containerd should create none
// there, so this is a safety net that leaves namespaces of concurrent clusters alone.
func (c *Cluster) removeNewCNINetns() error {
	if c.cniNetnsBefore == nil {
		return nil
	}
	var errs []error
	for m := range listCNINetns() {
		if c.cniNetnsBefore[m] {
			continue
		}
		ino, err := inodeOf(m)
		if err != nil || netnsInUse(ino) {
			continue
		}
		_ = unix.Unmount(m, unix.MNT_DETACH)
		if err := os.Remove(m); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func netnsInUse(ino uint64) bool {
	want := fmt.Sprintf("net:[%d]", ino)
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if link, err := os.Readlink("/proc/" + e.Name() + "/ns/net"); err == nil && link == want {
			return true
		}
	}
	return false
}

// removeHostLeftovers deletes the few files the kubelet and CNI write outside the work dir
// at fixed paths: container log symlinks and CNI result caches of killed sandboxes.
func (c *Cluster) removeHostLeftovers() {
	if links, _ := filepath.Glob("/var/log/containers/*.log"); c.workDir != "" {
		for _, l := range links {
			if target, err := os.Readlink(l); err == nil && c.underLayout(target) {
				_ = os.Remove(l)
			}
		}
	}
	var res []string
	ids := append([]string(nil), c.containerIDs...)
	// Task bundle directories name every container, even those of a containerd killed outright.
	bundles, _ := filepath.Glob(filepath.Join(c.ContainerdStateDir(), "io.containerd.runtime.v2.task", "k8s.io", "*"))
	for _, b := range bundles {
		id := filepath.Base(b)
		ids = append(ids, id)
		// A SIGKILLed shim leaves its socket at /run/containerd/s/sha256(<address>/<ns>/<id>).
		if c.containerdSock != "" {
			sum := sha256.Sum256([]byte(filepath.Join(c.containerdSock, "k8s.io", id)))
			_ = os.Remove(fmt.Sprintf("/run/containerd/s/%x", sum))
		}
	}
	if c.netnsName != "" {
		res, _ = filepath.Glob("/var/lib/cni/results/" + c.netnsName + "-*")
		// <network>-<sandbox id>-<ifname>: the sandbox id also names its loopback cache.
		for _, r := range res {
			if parts := strings.Split(strings.TrimPrefix(filepath.Base(r), c.netnsName+"-"), "-"); len(parts) == 2 {
				ids = append(ids, parts[0])
			}
		}
	}
	for _, id := range ids {
		m, _ := filepath.Glob("/var/lib/cni/results/*-" + id + "-*")
		res = append(res, m...)
	}
	for _, r := range res {
		_ = os.Remove(r)
	}
	// Only removed when empty, so other users' files are never touched.
	_ = os.Remove("/var/lib/cni/results")
	_ = os.Remove("/var/lib/cni")

	// The kubelet's device-plugin socket directory and containerd's shim socket directory are fixed
	// paths shared by all clusters: remove them only when no other cluster is recorded.
	others, _ := filepath.Glob(filepath.Join(stateDir, "*.json"))
	for _, o := range others {
		if filepath.Base(o) != c.netnsName+".json" {
			return
		}
	}
	_ = os.RemoveAll("/var/lib/kubelet/device-plugins")
	for _, d := range []string{"/var/lib/kubelet", "/run/containerd/s", "/run/containerd/fifo",
		"/run/containerd/runc/k8s.io", "/run/containerd/runc", "/run/containerd", "/var/log/containers"} {
		_ = os.Remove(d) // fails, harmlessly, unless empty
	}
}
