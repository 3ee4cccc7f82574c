package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// runcWrapper exists because this sandbox lacks CAP_SYS_RESOURCE: runc fails with
// "failed to update /proc/self/oom_score_adj: Permission denied" when the kubelet asks for a
// negative score (-998 for sandboxes, -997 for Guaranteed pods). It clamps negative
// oomScoreAdj to 0 in the bundle's config.json (create) and in the process file (exec).
// CRI-O also passes the kubelet's hugepage limits whenever the kernel has the hugetlb controller
// (/proc/cgroups), where containerd asks whether it is mounted: on a cgroup v1 host without that
// hierarchy (this one) runc then fails with "cannot set hugetlb limit". There the wrapper
// empties the bundle's hugepageLimits, as containerd leaves them out.
const runcWrapper = `#!/bin/sh
bundle=""
process=""
prev=""
for a in "$@"; do
  case "$prev" in
    --bundle|-b) bundle="$a" ;;
    --process|-p) process="$a" ;;
  esac
  case "$a" in
    --bundle=*) bundle="${a#--bundle=}" ;;
    --process=*) process="${a#--process=}" ;;
  esac
  prev="$a"
done
fix() {
  if [ -f "$1" ]; then
    sed -i -E 's/"oomScoreAdj":[[:space:]]*-[0-9]+/"oomScoreAdj":0/g' "$1"
    if [ ! -e /sys/fs/cgroup/hugetlb ] && [ ! -e /sys/fs/cgroup/cgroup.controllers ]; then
      sed -i -z -E 's/"hugepageLimits":[[:space:]]*\[[^]]*\]/"hugepageLimits":[]/g' "$1"
    fi
  fi
}
[ -n "$bundle" ] && fix "$bundle/config.json"
[ -n "$process" ] && fix "$process"
exec %s "$@"
`

func (c *Cluster) startContainerd() error {
	base := filepath.Join(c.workDir, "containerd")
	cniConf := filepath.Join(c.workDir, "cni", "net.d")
	for _, d := range []string{base, cniConf, c.runcRoot, c.ContainerdStateDir()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := makeSharedMount(c.ContainerdStateDir()); err != nil {
		return err
	}
	wrapper, err := c.writeRuncWrapperAndCNI(cniConf)
	if err != nil {
		return err
	}
	// Every path lives under the work dir (netns_mounts_under_state_dir keeps pod network
	// namespaces there too) so concurrent clusters never share state and Stop finds all mounts.
	config := fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]

[grpc]
  address = %q

[ttrpc]
  address = %q

[debug]
  address = ""

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = %q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  disable_apparmor = true

  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = %q
        Root = %q
        SystemdCgroup = false

  # hosts.toml per registry (StartRegistry writes one for its plain-HTTP registry).
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = %q

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q
    max_conf_num = 1
`, c.ContainerdRoot(), c.ContainerdStateDir(), c.containerdSock, c.containerdSock+".ttrpc",
		filepath.Join(base, "opt"), SandboxImage, wrapper, c.runcRoot, c.registryHostsDir(), cniBinDir, cniConf)
	cfgPath := filepath.Join(base, "config.toml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o644); err != nil {
		return err
	}
	p, err := c.startProc("containerd", c.Command(context.Background(), "containerd", "--config", cfgPath))
	c.mu.Lock()
	c.containerd = p
	c.mu.Unlock()
	return err
}

// makeSharedMount bind-mounts dir onto itself as a shared mount: a pod may then mount it with
// HostToContainer propagation (the exporter's mount of containerd's task directory), which
// containerd refuses on a directory of a private mount ("is not a shared or slave mount"). On a
// node /run is shared already (systemd makes every mount shared); a test's work dir under /tmp
// may not be. Stop unmounts it with everything else under the work dir.
func makeSharedMount(dir string) error {
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind-mounting %s onto itself: %w", dir, err)
	}
	if err := unix.Mount("", dir, "", unix.MS_SHARED|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("making %s a shared mount: %w", dir, err)
	}
	return nil
}

func (c *Cluster) ctr(ctx context.Context, args ...string) ([]byte, error) {
	return runCmd(ctx, "ctr", append([]string{"-n", "k8s.io", "--address", c.containerdSock}, args...)...)
}

func (c *Cluster) waitContainerd(ctx context.Context) error {
	return c.poll(ctx, "containerd", c.containerd, func() (bool, error) {
		if _, err := os.Stat(c.containerdSock); err != nil {
			return false, nil //nolint:nilerr // no socket yet: poll again
		}
		_, err := c.ctr(ctx, "version")
		return err == nil, nil
	})
}

func (c *Cluster) importImages(ctx context.Context) error {
	archive := filepath.Join(c.workDir, "images.tar")
	if err := buildImageArchive(archive); err != nil {
		return fmt.Errorf("build image archive: %w", err)
	}
	if out, err := c.ctr(ctx, "images", "import", archive); err != nil {
		return fmt.Errorf("ctr images import: %w: %s", err, out)
	}
	return os.Remove(archive)
}

// writeRuncWrapperAndCNI writes the runc wrapper both runtimes run (runcWrapper, around the
// runc on PATH) and the CNI configuration cniConf, and returns the wrapper's path.
func (c *Cluster) writeRuncWrapperAndCNI(cniConf string) (string, error) {
	runc, err := exec.LookPath("runc")
	if err != nil {
		return "", err
	}
	wrapper := filepath.Join(c.workDir, "runc-wrapper")
	if err := os.WriteFile(wrapper, []byte(fmt.Sprintf(runcWrapper, runc)), 0o755); err != nil {
		return "", err
	}
	return wrapper, c.writeCNIConfig(cniConf)
}
