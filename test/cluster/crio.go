package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
)

// Runtimes the node can run on (Options.Runtime).
const (
	RuntimeContainerd = "containerd"
	RuntimeCRIO       = "crio"
)

// crioDirEnv names the directory test/crio/build.sh prints: crio, pinns and copyimg.
const crioDirEnv = "CRIO_DIR"

// CRIORoot is CRI-O's containers/storage graph root: overlay/<layer>/diff holds each
// container's writable layer, overlay-containers/ and overlay-layers/ its records.
func (c *Cluster) CRIORoot() string { return filepath.Join(c.workDir, "crio", "root") }

// CRIORunRoot is CRI-O's containers/storage run root (its mounts' state, each pod's shm).
func (c *Cluster) CRIORunRoot() string { return filepath.Join(c.workDir, "crio", "run") }

// Runtime is the node's container runtime, RuntimeContainerd or RuntimeCRIO.
func (c *Cluster) Runtime() string { return c.runtime }

// RuntimeSocket is the CRI socket the kubelet talks to (containerd's or CRI-O's).
func (c *Cluster) RuntimeSocket() string {
	if c.runtime == RuntimeCRIO {
		return c.crioSock
	}
	return c.containerdSock
}

// crioPreflight lists what a CRI-O node needs beyond the common parts.
func crioPreflight(dir string) []string {
	var problems []string
	if dir == "" {
		return []string{"no CRI-O directory: set Options.CRIODir or " + crioDirEnv + " (build with test/crio/build.sh; it prints the directory)"}
	}
	for _, b := range []string{"crio", "pinns", "copyimg"} {
		if fi, err := os.Stat(filepath.Join(dir, b)); err != nil || fi.Mode()&0o111 == 0 {
			problems = append(problems, fmt.Sprintf("%s missing in %s: run test/crio/build.sh and set %s to the directory it prints", b, dir, crioDirEnv))
		}
	}
	if _, err := exec.LookPath("conmon"); err != nil {
		problems = append(problems, "conmon not on PATH: install conmon (`make deps`)")
	}
	return problems
}

// crioPolicy accepts every image unsigned: the images are built and loaded locally.
const crioPolicy = `{"default": [{"type": "insecureAcceptAnything"}]}`

func (c *Cluster) crioPolicyPath() string { return filepath.Join(c.workDir, "crio", "policy.json") }

// startCRIO writes CRI-O's configuration, every path under the work dir so that concurrent
// clusters share nothing and Stop finds every mount, loads the test images into its storage
// and starts it.
func (c *Cluster) startCRIO(ctx context.Context) error {
	base := filepath.Join(c.workDir, "crio")
	cniConf := filepath.Join(c.workDir, "cni", "net.d")
	for _, d := range []string{base, cniConf, c.runcRoot, c.CRIORoot(), c.CRIORunRoot()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	conmon, err := exec.LookPath("conmon")
	if err != nil {
		return err
	}
	wrapper, err := c.writeRuncWrapperAndCNI(cniConf)
	if err != nil {
		return err
	}
	if err := os.WriteFile(c.crioPolicyPath(), []byte(crioPolicy), 0o644); err != nil {
		return err
	}
	// drop_infra_ctr false: every pod gets its infra (pause) container, as with containerd;
	// pause_command "" runs the sandbox image's own entrypoint (it sleeps), not /pause.
	// cgroupfs wants conmon in the pod's cgroup (monitor_cgroup "pod"). No hooks, no NRI, no
	// SELinux or AppArmor, no seccomp profile of its own: the test node runs without them.
	config := fmt.Sprintf(`[crio]
root = %q
runroot = %q
storage_driver = "overlay"
log_dir = %q
version_file = %q
version_file_persist = %q
clean_shutdown_file = %q

[crio.api]
listen = %q
stream_address = "127.0.0.1"
stream_port = "0"

[crio.runtime]
cgroup_manager = "cgroupfs"
default_runtime = "runc"
container_exits_dir = %q
container_attach_socket_dir = %q
namespaces_dir = %q
pinns_path = %q
drop_infra_ctr = false
selinux = false
apparmor_profile = "unconfined"
hooks_dir = []
cdi_spec_dirs = []
decryption_keys_path = %q
irqbalance_config_file = ""
enable_criu_support = false
log_level = "info"

[crio.runtime.runtimes.runc]
runtime_path = %q
runtime_type = "oci"
runtime_root = %q
monitor_path = %q
monitor_cgroup = "pod"

[crio.image]
pause_image = %q
pause_command = ""
signature_policy = %q
signature_policy_dir = %q

[crio.network]
network_dir = %q
plugin_dirs = [%q]

[crio.metrics]
enable_metrics = false

[crio.nri]
enable_nri = false
`, c.CRIORoot(), c.CRIORunRoot(), filepath.Join(base, "pod-logs"), filepath.Join(base, "version"),
		filepath.Join(base, "version-persist"), filepath.Join(base, "clean.shutdown"),
		c.crioSock, filepath.Join(base, "exits"), filepath.Join(base, "attach"), filepath.Join(base, "ns"),
		filepath.Join(c.crioDir, "pinns"), filepath.Join(base, "keys"),
		wrapper, c.runcRoot, conmon, SandboxImage, c.crioPolicyPath(), filepath.Join(base, "policies"),
		cniConf, cniBinDir)
	cfgPath := filepath.Join(base, "crio.conf")
	if err := os.WriteFile(cfgPath, []byte(config), 0o644); err != nil {
		return err
	}
	if err := c.loadCRIOImages(ctx); err != nil {
		return err
	}
	// --config-dir "": no drop-ins from /etc/crio/crio.conf.d.
	p, err := c.startProc("crio", c.Command(context.Background(), filepath.Join(c.crioDir, "crio"),
		"--config", cfgPath, "--config-dir", ""))
	c.mu.Lock()
	c.crio = p
	c.mu.Unlock()
	return err
}

// loadCRIOImages loads the test images into CRI-O's storage (CRI-O has no `ctr import`) before
// CRI-O starts, with CRI-O's own copier.
func (c *Cluster) loadCRIOImages(ctx context.Context) error {
	archive := filepath.Join(c.workDir, "images.tar")
	if err := buildImageArchive(archive); err != nil {
		return fmt.Errorf("build image archive: %w", err)
	}
	for _, img := range []string{BusyboxImage, SandboxImage, BusyboxVolumeImage} {
		if err := c.crioLoad(ctx, archive, img); err != nil {
			return err
		}
	}
	return os.Remove(archive)
}

// blobInfoCache is where containers/image, run as root, keeps what it learnt of blobs; copyimg
// has no flag to put it elsewhere.
const blobInfoCache = "/var/lib/containers/cache/blob-info-cache-v1.sqlite"

// crioLoad copies the image name out of a docker-archive into CRI-O's storage. The blob cache
// copyimg leaves on the host is removed again when it was not there before (a podman of the
// machine's own keeps its).
func (c *Cluster) crioLoad(ctx context.Context, archive, name string) error {
	if _, err := os.Stat(blobInfoCache); errors.Is(err, fs.ErrNotExist) {
		defer func() {
			_ = os.Remove(blobInfoCache)
			for d := filepath.Dir(blobInfoCache); d != "/var/lib"; d = filepath.Dir(d) {
				_ = os.Remove(d) // only when empty
			}
		}()
	}
	out, err := runCmd(ctx, filepath.Join(c.crioDir, "copyimg"), "--root", c.CRIORoot(), "--runroot", c.CRIORunRoot(),
		"--storage-driver", "overlay", "--signature-policy", c.crioPolicyPath(),
		"--image-name", name, "--import-from", "docker-archive:"+archive+":"+name)
	if err != nil {
		return fmt.Errorf("loading %s into CRI-O's storage: %w: %s", name, err, out)
	}
	return nil
}

// waitCRIO waits until CRI-O answers on its socket: crio's `status info` over its HTTP API.
func (c *Cluster) waitCRIO(ctx context.Context) error {
	return c.poll(ctx, "crio", c.crio, func() (bool, error) {
		if _, err := os.Stat(c.crioSock); err != nil {
			return false, nil //nolint:nilerr // no socket yet: poll again
		}
		_, err := runCmd(ctx, filepath.Join(c.crioDir, "crio"), "status", "--socket", c.crioSock, "info")
		return err == nil, nil
	})
}

// writeCNIConfig writes the node's one CNI network: a bridge with host-local addresses, named
// after the cluster so leftovers in /var/lib/cni/results can be told apart.
func (c *Cluster) writeCNIConfig(dir string) error {
	conflist := fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": %q,
  "plugins": [{
    "type": "bridge",
    "bridge": "cni0",
    "isGateway": true,
    "ipMasq": false,
    "hairpinMode": true,
    "ipam": {
      "type": "host-local",
      "ranges": [[{"subnet": %q}]],
      "routes": [{"dst": "0.0.0.0/0"}],
      "dataDir": %q
    }
  }]
}
`, c.netnsName, podSubnet, filepath.Join(c.workDir, "cni", "ipam"))
	return os.WriteFile(filepath.Join(dir, "10-edg.conflist"), []byte(conflist), 0o644)
}

// crioExporterPathArgs are ExporterPathArgs on a CRI-O node: CRI-O's storage root, containerd's
// directories left at their defaults, as the chart with exporter.ephemeralStorage.containerd off.
func (c *Cluster) crioExporterPathArgs() []string {
	return []string{"--kubelet.root-dir=" + c.kubeletRoot, "--kubelet.pod-logs-dir=" + c.PodLogsDir(),
		"--crio.storage-root=" + c.CRIORoot(),
		"--cgroup.root=" + c.CgroupRoot(), "--cgroup.driver=cgroupfs"}
}

// crioImport loads the docker-archive of the one image name into CRI-O's storage
// (ImportImage); CRI-O finds it at the kubelet's next image status.
func (c *Cluster) crioImport(ctx context.Context, archive, name string) error {
	return c.crioLoad(ctx, archive, name)
}

// CRIOContainerLayer is the writable layer of CRI-O's container id as CRI-O itself reports
// it: its HTTP API on the CRI socket (GET /containers/<id>) names the container's root, the
// overlay's merged directory <root>/overlay/<layer>/merged, whose upper directory is diff beside it.
func (c *Cluster) CRIOContainerLayer(ctx context.Context, id string) (string, error) {
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", c.crioSock)
	}}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://crio/containers/"+url.PathEscape(id), nil)
	if err != nil {
		return "", err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("CRI-O's container info of %s: %w", id, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("CRI-O's container info of %s: %s: %s", id, resp.Status, b)
	}
	var info struct {
		Root string `json:"root"`
	}
	if err := json.Unmarshal(b, &info); err != nil {
		return "", fmt.Errorf("CRI-O's container info of %s: %w: %s", id, err, b)
	}
	if filepath.Base(info.Root) != "merged" || filepath.Dir(filepath.Dir(info.Root)) != filepath.Join(c.CRIORoot(), "overlay") {
		return "", fmt.Errorf("CRI-O's container %s has root %q, not <%s>/overlay/<layer>/merged", id, info.Root, c.CRIORoot())
	}
	return filepath.Join(filepath.Dir(info.Root), "diff"), nil
}
