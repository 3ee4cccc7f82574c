package cluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

const cniBinDir = "/usr/lib/cni"

// preflight reports every missing prerequisite at once, each with the command that fixes it,
// so a failed run tells the reader exactly what to install instead of failing deep inside.
func preflight(opts Options) error {
	binDir := opts.BinDir
	var problems []string
	if opts.Runtime == RuntimeCRIO {
		problems = append(problems, crioPreflight(opts.CRIODir)...)
	}
	if os.Geteuid() != 0 {
		problems = append(problems, "not running as root: the cluster needs root for network namespaces, mounts and cgroups (run the tests as root, e.g. `sudo -E go test ...`)")
	}
	if binDir == "" {
		problems = append(problems, "no Kubernetes binary directory: set Options.BinDir or K8S_BIN_DIR (build with `make k8s-binaries`; it prints the directory)")
	} else {
		for _, b := range []string{"kube-apiserver", "kubelet"} {
			if fi, err := os.Stat(filepath.Join(binDir, b)); err != nil || fi.Mode()&0o111 == 0 {
				problems = append(problems, fmt.Sprintf("%s missing in %s: run `make k8s-binaries` (or test/k8sbin/build.sh kube-apiserver kubelet) and set K8S_BIN_DIR to the directory it prints", b, binDir))
			}
		}
	}
	debs := []struct{ bin, pkg string }{
		{"etcd", "etcd-server"},
		{"containerd", "containerd"},
		{"containerd-shim-runc-v2", "containerd"},
		{"ctr", "containerd"},
		{"runc", "runc"},
		{"nsenter", "util-linux"},
		{"ip", "iproute2"},
		{"kubectl", "kubectl (not a Debian package here; put a kubectl >= 1.30 on PATH)"},
	}
	for _, d := range debs {
		if _, err := exec.LookPath(d.bin); err != nil {
			problems = append(problems, fmt.Sprintf("%s not on PATH: install %s (`make deps`)", d.bin, d.pkg))
		}
	}
	for _, p := range []string{"bridge", "host-local", "loopback"} {
		if _, err := os.Stat(filepath.Join(cniBinDir, p)); err != nil {
			problems = append(problems, fmt.Sprintf("CNI plugin %s/%s missing: install containernetworking-plugins (`make deps`)", cniBinDir, p))
		}
	}
	if err := CheckStatic(busyboxPath); err != nil {
		problems = append(problems, fmt.Sprintf("%v: the test images need a static busybox: install busybox-static (`make deps`)", err))
	}
	if len(problems) > 0 {
		return errors.New("cluster prerequisites missing:\n  - " + strings.Join(problems, "\n  - "))
	}
	return nil
}
