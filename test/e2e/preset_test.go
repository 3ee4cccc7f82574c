package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/emptydir-guard/emptydir-guard/exporter/part"
	"github.com/emptydir-guard/emptydir-guard/internal/mountinfo"
	"github.com/emptydir-guard/emptydir-guard/test/cluster"
	"github.com/emptydir-guard/emptydir-guard/test/duoracle"
	"github.com/emptydir-guard/emptydir-guard/test/framework"
)

// realPresets are the chart presets whose node layout this machine reproduces: the kubelet's
// root, containerd's root and state and the pod logs at the distribution's own host paths, or
// (kind) the kubelet's cgroup root /kubelet. Generic's directories are not reproduced: every
// kubelet on this machine makes /var/lib/kubelet/device-plugins (a path of its own, whatever
// its --root-dir), and every containerd shim /run/containerd/s, so they are never a fresh
// directory this test may own; there the cluster's directories stay below its work dir and are named
// by values (as every other test names them). docs/deploy.md cites the test.
var realPresets = []struct {
	preset string
	layout cluster.Layout
	// kubeletRoot, directories: the chart values of the kubelet root, or of every node directory,
	// for a preset whose own are generic's; false installs with the preset alone.
	kubeletRoot, directories bool
}{
	{preset: "k0s", layout: cluster.Layout{KubeletRootDir: "/var/lib/k0s/kubelet", ContainerdRoot: "/var/lib/k0s/containerd",
		ContainerdStateDir: "/run/k0s/containerd", PodLogsDir: "/var/log/pods"}},
	{preset: "microk8s", layout: cluster.Layout{KubeletRootDir: "/var/snap/microk8s/common/var/lib/kubelet",
		ContainerdRoot: "/var/snap/microk8s/common/var/lib/containerd", ContainerdStateDir: "/var/snap/microk8s/common/run/containerd",
		PodLogsDir: "/var/log/pods"}},
	{preset: "k3s", layout: cluster.Layout{ContainerdRoot: "/var/lib/rancher/k3s/agent/containerd",
		ContainerdStateDir: "/run/k3s/containerd", PodLogsDir: "/var/log/pods"}, kubeletRoot: true},
	{preset: "kind", layout: cluster.Layout{CgroupRoot: "/kubelet"}, directories: true},
}

// TestPresetsOnRealCluster starts a cluster with each preset's node layout (realPresets), one
// after the other (the host paths are fixed: cluster.Layout holds a host-wide lock, and removes
// what it created), installs the chart with preset=<name> and none of the node's paths, and
// checks that the calibration on the exporter's own pod finds no mismatch and the layout it
// finds is the cluster's, and that a pod's emptyDir, writable layer and logs are each
// published at GNU du's figure. On the k0s cluster the chart is also installed with the
// default preset (generic): its calibration names each wrong value.
func TestPresetsOnRealCluster(t *testing.T) {
	requireCluster(t)
	for _, p := range realPresets {
		t.Run(p.preset, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(rootCtx, 6*time.Minute)
			defer cancel()
			t0 := time.Now()
			opts := framework.SharedClusterOptions(t.Logf)
			opts.Layout = &p.layout
			c := ownCluster(ctx, t, opts)
			t.Logf("cluster with the %s layout up in %s", p.preset, time.Since(t0).Round(time.Second))

			writer := framework.RunPod(ctx, t, c, presetWriter(c, framework.Namespace(ctx, t, c, "preset-"+p.preset)))
			pluginWrite(ctx, t, c, writer, "/data/f", 3)
			pluginWrite(ctx, t, c, writer, "/fill", 2)

			values := "preset: " + p.preset + "\n" + optInParts
			if p.kubeletRoot {
				values += "\n  kubeletRootDir: " + c.KubeletRootDir()
			}
			if p.directories {
				values += "\n  kubeletRootDir: " + c.KubeletRootDir() + "\n  ephemeralStorage:\n    podLogsDir: " + c.PodLogsDir() +
					"\n    containerd: {stateDir: " + c.ContainerdStateDir() + ", root: " + c.ContainerdRoot() + "}"
			}
			exp := presetInstall(ctx, t, c, p.preset, values)
			checkLayout(ctx, t, c, exp)
			checkPartsEqualDu(ctx, t, c, exp, writer)

			if p.preset == "k0s" {
				// The default preset on k0s: the kubelet root and containerd's directories are
				// generic's, empty directories made on the node (DirectoryOrCreate), which the
				// calibration names with the values to set.
				wrongDirectories(t, "/var/lib/kubelet/pods", "/run/containerd/io.containerd.runtime.v2.task",
					"/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs", "/var/lib/containerd/io.containerd.grpc.v1.cri/containers")
				gen := presetInstall(ctx, t, c, "generic", "preset: generic\n"+optInParts)
				// Found: the kubelet root (its own emptyDir's bind in the mount table); not
				// containerd's task directory, whose empty stand-in mounts no root filesystem.
				checkLayoutFound(ctx, t, c, gen, map[string]string{"containerd_task_dir": ""},
					"kubelet.root-dir own_pod_not_found "+c.KubeletRootDir(),
					"containerd.task-dir no_rootfs_mount ")
			}
			t.Logf("preset %s: %s", p.preset, time.Since(t0).Round(time.Second))
		})
	}
}

// presetWriter is a pod with an emptyDir (data), an ephemeral-storage limit (so its writable
// layer and logs are measured) and some log lines.
func presetWriter(c *cluster.Cluster, ns string) *corev1.Pod {
	p := pluginWriter(c, ns, "writer", "64Mi", "256Mi")
	p.Spec.Containers[0].Command = []string{"sh", "-c", "seq 1 20000; exec sleep 2147483647"}
	return p
}

// presetInstall renders the chart as release in a namespace of its own with values and the
// image every install here needs (no remediator), applies it, and runs its exporter pod.
func presetInstall(ctx context.Context, t *testing.T, c *cluster.Cluster, release, values string) *corev1.Pod {
	t.Helper()
	ns := "guard-" + release
	objs := helmTemplate(t, release, ns, `
image: {repository: localhost/emptydir-guard, tag: test, pullPolicy: Never}
remediator: {enabled: false}
`+values+"\n")
	in := installObjects(ctx, t, c, install{ns: ns, exporter: release + "-emptydir-exporter"}, objs, deployAPIEnv(t, c))
	ds, err := c.Client().AppsV1().DaemonSets(ns).Get(ctx, in.exporter, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	exp := deployPodFromTemplate(ctx, t, c, ns, in.exporter+"-"+framework.RandSuffix(), ds.Spec.Template, daemonSetOwner(ds))
	return deployWaitReady(ctx, t, c, exp)
}

// optInParts starts the exporter's values: the containers' writable layers and logs published
// one by one.
const optInParts = "exporter:\n  metricOptInList: [emptydir_container_ephemeral_storage_part_bytes]"

// checkPartsEqualDu: the exporter publishes the writer's emptyDir, its container's writable
// layer (the upperdir of its root filesystem, from the node's mount table) and its log directory
// each at du's figure.
func checkPartsEqualDu(ctx context.Context, t *testing.T, c *cluster.Cluster, exp, writer *corev1.Pod) {
	t.Helper()
	w, err := c.Client().CoreV1().Pods(writer.Namespace).Get(ctx, writer.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	upper := writableLayerOf(ctx, t, c, w.Status.ContainerStatuses[0].ContainerID)
	want := map[string]int64{
		"emptyDir":       framework.DuBytes(t, part.EmptyDirPath(c.KubeletRootDir(), string(w.UID), "data")),
		"writable_layer": framework.DuBytes(t, upper),
		"logs":           logFilesDu(t, filepath.Join(c.PodLogsDir(), w.Namespace+"_"+w.Name+"_"+string(w.UID), "app")),
	}
	pod := map[string]string{"namespace": w.Namespace, "pod": w.Name}
	framework.Eventually(t, 60*time.Second, time.Second, "the writer's parts at du's figures", func() (bool, string) {
		fams, err := framework.Scrape(ctx, c, deployExporterURL(exp)+"/metrics")
		if err != nil {
			return false, err.Error()
		}
		got := map[string]int64{}
		if v, ok := framework.Sample(fams, "emptydir_used_bytes", map[string]string{"namespace": w.Namespace, "pod": w.Name, "volume": "data"}); ok {
			got["emptyDir"] = int64(v)
		}
		for _, label := range []string{"writable_layer", "logs"} {
			l := map[string]string{"container": "app", "part": label}
			for k, v := range pod {
				l[k] = v
			}
			if v, ok := framework.Sample(fams, "emptydir_container_ephemeral_storage_part_bytes", l); ok {
				got[label] = int64(v)
			}
		}
		return len(got) == len(want) && got["emptyDir"] == want["emptyDir"] && got["writable_layer"] == want["writable_layer"] && got["logs"] == want["logs"],
			fmt.Sprintf("exporter %v, du %v", got, want)
	})
	if want["writable_layer"] < 2<<20 || want["emptyDir"] < 3<<20 || want["logs"] == 0 {
		t.Errorf("du %v: the writes did not land where they were meant to", want)
	}
}

// writableLayerOf is the upper directory of the container with runtime ID id as its runtime has it:
// containerd's rootfs overlay in the node's mount table, or CRI-O's own answer on its socket.
func writableLayerOf(ctx context.Context, t *testing.T, c *cluster.Cluster, id string) string {
	t.Helper()
	runtime, cid, _ := part.RuntimeID(id)
	if runtime == "cri-o" {
		layer, err := c.CRIOContainerLayer(ctx, cid)
		if err != nil {
			t.Fatal(err)
		}
		return layer
	}
	mounts, err := mountinfo.Read("")
	if err != nil {
		t.Fatal(err)
	}
	rootfs := filepath.Join(c.ContainerdTaskDir(), "k8s.io", cid, "rootfs")
	for _, m := range mounts {
		if m.Point == rootfs && m.Upper != "" {
			return m.Upper
		}
	}
	t.Fatalf("no overlay at %s in the mount table", rootfs)
	return ""
}

// wrongDirectories stands in for the directories a hostPath of a wrong value creates on a node: each
// made (with its missing parents) and bind-mounted shared onto itself, as systemd's shared
// root has every directory (the HostToContainer mounts of the kubelet pods and the task directory
// need it; this machine's root is private); unmounted and removed, with the parents made for
// them, when the test ends (a parent another cluster's containerd filled meanwhile stays).
func wrongDirectories(t *testing.T, dirs ...string) {
	t.Helper()
	var made, mounted []string
	t.Cleanup(func() {
		for _, d := range mounted {
			_ = unix.Unmount(d, unix.MNT_DETACH)
		}
		for i := len(made) - 1; i >= 0; i-- {
			if err := os.Remove(made[i]); err != nil && !errors.Is(err, os.ErrNotExist) && !errors.Is(err, unix.ENOTEMPTY) {
				t.Errorf("removing %s: %v", made[i], err)
			}
		}
	})
	for _, d := range dirs {
		var missing []string
		for p := d; p != "/"; p = filepath.Dir(p) {
			if _, err := os.Lstat(p); err == nil {
				break
			}
			missing = append(missing, p)
		}
		slices.Reverse(missing)
		made = append(made, missing...)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mount(d, d, "", unix.MS_BIND, ""); err != nil {
			t.Fatalf("bind-mounting %s: %v", d, err)
		}
		mounted = append(mounted, d)
		if err := unix.Mount("", d, "", unix.MS_SHARED, ""); err != nil {
			t.Fatalf("making %s shared: %v", d, err)
		}
	}
}

// logFilesDu is GNU du of each log file in a container's log directory, summed: the kubelet
// counts the files, not the directory's own block.
func logFilesDu(t *testing.T, dir string) int64 {
	t.Helper()
	framework.DuBytes(t, dir) // syncs the filesystem
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range entries {
		files = append(files, filepath.Join(dir, e.Name()))
	}
	if len(files) == 0 {
		t.Fatalf("no log file in %s", dir)
	}
	sizes, err := duoracle.Bytes(files...)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, b := range sizes {
		n += b
	}
	return n
}
