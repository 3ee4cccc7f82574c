package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/emptydir-guard/emptydir-guard/internal/testbin"
	"github.com/emptydir-guard/emptydir-guard/test/cluster"
	"github.com/emptydir-guard/emptydir-guard/test/framework"
)

// crioExporterAddr is the lone exporter of TestCRIONode's layer check, inside the namespace.
const crioExporterAddr = "127.0.0.1:19811"

// TestCRIONode runs the node on CRI-O (test/crio/build.sh: CRI-O v1.34 built from its module,
// conmon and runc from Debian, the kubelet on CRI-O's socket): the exporter, given CRI-O's
// storage root and no containerd directory, measures each container's writable layer equal to GNU
// du of the directory CRI-O itself names for it, the seed scenario and the kubelet's
// local-storage eviction scenario pass as they do on containerd, and the chart installs there
// with the exporter calibrating its own CRI-O container.
func TestCRIONode(t *testing.T) {
	requireCluster(t)
	ctx, cancel := context.WithTimeout(rootCtx, 30*time.Minute)
	defer cancel()
	opts := framework.SharedClusterOptions(t.Logf)
	opts.Runtime = cluster.RuntimeCRIO
	c := ownCluster(ctx, t, opts)
	t.Run("writable layers equal du", func(t *testing.T) { crioLayersEqualDu(ctx, t, c) })
	t.Run("seed scenario", func(t *testing.T) { scenarioOnlyWeEnforce(t, c, "") })
	t.Run("kubelet local-storage scenario", func(t *testing.T) { lsciEviction(t, c) })
	t.Run("the chart on CRI-O", func(t *testing.T) { crioChart(ctx, t, c) })
}

// crioChart installs the chart on the CRI-O node as a user on a CRI-O distribution does
// (containerd off, CRI-O's storage root; the node's other directories are this cluster's): the
// calibration on the exporter's own container finds CRI-O and its storage root with no
// mismatch, and a pod's emptyDir, writable layer and logs are each published at GNU du's
// figure. Installed with neither runtime, calibration names --crio.storage-root with the root
// it found.
func crioChart(ctx context.Context, t *testing.T, c *cluster.Cluster) {
	writer := framework.RunPod(ctx, t, c, presetWriter(c, framework.Namespace(ctx, t, c, "crio-chart")))
	pluginWrite(ctx, t, c, writer, "/data/f", 3)
	pluginWrite(ctx, t, c, writer, "/fill", 2)
	directories := "\n  kubeletRootDir: " + c.KubeletRootDir() + "\n  ephemeralStorage:\n    podLogsDir: " + c.PodLogsDir() +
		"\n    containerd: {enabled: false}"
	crio := map[string]string{"container_runtime": "cri-o", "crio_storage_root": c.CRIORoot(),
		"containerd_task_dir": "", "containerd_snapshotter_root": ""}

	exp := presetInstall(ctx, t, c, "crio", optInParts+directories+"\n    crio: {enabled: true, storageRoot: "+c.CRIORoot()+"}")
	checkLayoutFound(ctx, t, c, exp, crio)
	checkPartsEqualDu(ctx, t, c, exp, writer)

	none := presetInstall(ctx, t, c, "noruntime", optInParts+directories)
	checkLayoutFound(ctx, t, c, none, crio, "crio.storage-root not_set "+c.CRIORoot())
}

// crioLayersEqualDu writes different amounts into the writable layers of a pod's containers
// (a restartable init container among them) and waits until the exporter reports each one at
// GNU du of overlay/<layer>/diff, the layer found through CRI-O's API, not its files.
func crioLayersEqualDu(ctx context.Context, t *testing.T, c *cluster.Cluster) {
	ns := framework.Namespace(ctx, t, c, "layers")
	framework.StartInNetns(t, c, "crio-exporter", testbin.Path(t, "emptydir-exporter"), append(c.ExporterPathArgs(),
		"--node.name="+c.NodeName(), "--kubeconfig="+c.KubeconfigPath(), "--metric-opt-in-list=.*",
		"--collection.interval=2s", "--web.listen-address="+crioExporterAddr)...)

	// MiB each container writes to /fill, beside a few small files (a directory of them).
	writes := map[string]int{"small": 1, "large": 7, "sidecar": 3}
	ctr := func(name string) corev1.Container {
		return corev1.Container{Name: name, Image: cluster.BusyboxImage, ImagePullPolicy: corev1.PullNever,
			Command: []string{"sh", "-c", "exec sleep 2147483647"},
			// The exporter measures the layers of containers with an ephemeral-storage limit.
			Resources: corev1.ResourceRequirements{
				Limits:   corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("100Mi")},
				Requests: corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("0")},
			}}
	}
	sidecar := ctr("sidecar")
	sidecar.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
	pod := framework.RunPod(ctx, t, c, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "layers", Namespace: ns},
		Spec: corev1.PodSpec{NodeName: c.NodeName(), TerminationGracePeriodSeconds: ptr.To(int64(0)),
			InitContainers: []corev1.Container{sidecar}, Containers: []corev1.Container{ctr("small"), ctr("large")}}})
	for name, mib := range writes {
		script := fmt.Sprintf("mkdir -p /var/many && for i in $(seq 1 %d); do echo $i > /var/many/f$i; done && dd if=/dev/zero of=/fill bs=1M count=%d conv=fsync 2>&1",
			10*mib, mib)
		if _, stderr, err := c.ExecInPod(ctx, ns, pod.Name, name, "sh", "-c", script); err != nil {
			t.Fatalf("writing in %s: %v (%s)", name, err, stderr)
		}
	}
	pod, err := c.Client().CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	statuses := append(append([]corev1.ContainerStatus(nil), pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...)
	if len(statuses) != len(writes) {
		t.Fatalf("pod has %d container statuses, want %d", len(statuses), len(writes))
	}
	for _, st := range statuses {
		id, ok := strings.CutPrefix(st.ContainerID, "cri-o://")
		if !ok {
			t.Fatalf("container %s has ID %q, want cri-o://…: the node must run CRI-O", st.Name, st.ContainerID)
		}
		layer, err := c.CRIOContainerLayer(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		want := framework.DuBytes(t, layer)
		if want < int64(writes[st.Name])<<20 {
			t.Fatalf("%s: du of %s is %d bytes, want at least the %d MiB written: not the container's upper directory", st.Name, layer, want, writes[st.Name])
		}
		sel := map[string]string{"namespace": ns, "pod": pod.Name, "container": st.Name, "part": "writable_layer"}
		framework.Eventually(t, 2*time.Minute, time.Second, st.Name+"'s writable layer at du of "+layer, func() (bool, string) {
			fams, err := framework.Scrape(ctx, c, "http://"+crioExporterAddr+"/metrics")
			if err != nil {
				return false, err.Error()
			}
			if _, unlocated := framework.Sample(fams, "emptydir_container_writable_layer_unlocated", map[string]string{"namespace": ns, "pod": pod.Name, "container": st.Name}); unlocated {
				return false, "reported unlocated"
			}
			got, ok := framework.Sample(fams, "emptydir_container_ephemeral_storage_part_bytes", sel)
			return ok && int64(got) == want, fmt.Sprintf("exporter %v (reported: %v), du %d", int64(got), ok, want)
		})
		t.Logf("%s: writable layer %s: %d bytes, exporter and du agree", st.Name, layer, want)
	}
}
