//go:build linux

package exporter_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/emptydir-guard/emptydir-guard/exporter"
	"github.com/emptydir-guard/emptydir-guard/exporter/exportertest"
	"github.com/emptydir-guard/emptydir-guard/exporter/source"
)

// TestRuntimeLayersMeasured runs the pod informer, the filesystem source and the exporter over
// pods whose status names a CRI-O and a Docker (cri-dockerd) container: each writable layer is
// found through its runtime's own records and published as GNU du counts its directory; a CRI-O
// container of no record is published unlocated, by reason. Without --crio.storage-root and
// --docker.root both are other_runtime, as before.
func TestRuntimeLayersMeasured(t *testing.T) {
	const (
		crioCtr   = "0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c"
		crioLayer = "1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a"
		goneCtr   = "0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e"
		dockerCtr = "0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d"
		mountID   = "2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b"
	)
	node := t.TempDir()
	kubeletRoot, podLogs := filepath.Join(node, "var/lib/kubelet"), filepath.Join(node, "var/log/pods")
	crioRoot, dockerRoot := filepath.Join(node, "var/lib/containers/storage"), filepath.Join(node, "var/lib/docker")

	// CRI-O's records: the container volatile, as CRI-O creates it, its layer too.
	records := func(rel string, v any) {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		writeText(t, filepath.Join(crioRoot, rel), string(b))
	}
	records("overlay-containers/containers.json", []any{})
	records("overlay-containers/volatile-containers.json", []map[string]any{{"id": crioCtr, "names": []string{"k8s_main_crio-0_shop_u-crio_0"},
		"image": strings.Repeat("e", 64), "layer": crioLayer, "flags": map[string]any{"Volatile": true}}})
	records("overlay-layers/layers.json", []map[string]any{{"id": strings.Repeat("9", 64)}})
	records("overlay-layers/volatile-layers.json", []map[string]any{{"id": crioLayer, "parent": strings.Repeat("9", 64)}})
	crioDiff := filepath.Join(crioRoot, "overlay", crioLayer, "diff")
	writeBytes(t, filepath.Join(crioDiff, "tmp", "cache.bin"), 3<<20+17)
	writeBytes(t, filepath.Join(crioRoot, "overlay", strings.Repeat("9", 64), "diff", "usr", "bin", "app"), 1<<20) // the image's

	// Docker's layerdb record of the container's mount and its overlay2 directory.
	writeText(t, filepath.Join(dockerRoot, "image/overlay2/layerdb/mounts", dockerCtr, "mount-id"), mountID)
	dockerDiff := filepath.Join(dockerRoot, "overlay2", mountID, "diff")
	writeBytes(t, filepath.Join(dockerDiff, "data", "out.bin"), 2<<20+5)

	pods := []*corev1.Pod{
		runtimePod("shop", "crio-0", "u-crio", "cri-o://"+crioCtr),
		runtimePod("shop", "crio-gone", "u-gone", "cri-o://"+goneCtr),
		runtimePod("shop", "docker-0", "u-docker", "docker://"+dockerCtr),
	}
	for _, p := range pods {
		if err := os.MkdirAll(filepath.Join(kubeletRoot, "pods", string(p.UID)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(podLogs, p.Namespace+"_"+p.Name+"_"+string(p.UID), "main"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	series := func(pod, uid string, bytes int64) string {
		return fmt.Sprintf(`emptydir_container_ephemeral_storage_part_bytes{container="main",namespace="shop",node="node-1",part="logs",pod=%q,uid=%q} 0
emptydir_container_ephemeral_storage_part_bytes{container="main",namespace="shop",node="node-1",part="writable_layer",pod=%q,uid=%q} %d
`, pod, uid, pod, uid, bytes)
	}
	unlocated := func(pod, uid, reason string) string {
		return fmt.Sprintf(`emptydir_container_writable_layer_unlocated{container="main",namespace="shop",node="node-1",pod=%q,reason=%q,runtime_class="",uid=%q} 1
`, pod, reason, uid)
	}
	const head = `# HELP emptydir_container_ephemeral_storage_part_bytes The container's writable layer and logs in bytes, by part.
# TYPE emptydir_container_ephemeral_storage_part_bytes gauge
`
	const unlocatedHead = `# HELP emptydir_container_writable_layer_unlocated 1 when the container's writable layer could not be located, by reason and runtime_class.
# TYPE emptydir_container_writable_layer_unlocated gauge
`
	tests := []struct {
		name   string
		layers *source.LayerLocator
		want   string
	}{
		{name: "CRI-O's and Docker's roots given", layers: &source.LayerLocator{CRIOStorageRoot: crioRoot, DockerRoot: dockerRoot},
			want: head + series("crio-0", "u-crio", exportertest.DuBytes(t, crioDiff)) + series("crio-gone", "u-gone", 0) +
				series("docker-0", "u-docker", exportertest.DuBytes(t, dockerDiff)) +
				unlocatedHead + unlocated("crio-gone", "u-gone", source.LayerNoLayerRecord)},
		{name: "neither given: other_runtime, as before", layers: &source.LayerLocator{},
			want: head + series("crio-0", "u-crio", 0) + series("crio-gone", "u-gone", 0) + series("docker-0", "u-docker", 0) +
				unlocatedHead + unlocated("crio-0", "u-crio", source.LayerOtherRuntime) + unlocated("crio-gone", "u-gone", source.LayerOtherRuntime) +
				unlocated("docker-0", "u-docker", source.LayerOtherRuntime)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := make([]runtime.Object, 0, len(pods))
			for _, p := range pods {
				objs = append(objs, p.DeepCopy())
			}
			watcher, err := exporter.NewPodWatcher(fake.NewClientset(objs...), "node-1", 0)
			if err != nil {
				t.Fatal(err)
			}
			watcher.SetEphemeralStorage(true)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer func() { cancel(); watcher.Shutdown() }()
			if err := watcher.Start(ctx); err != nil {
				t.Fatal(err)
			}
			src := &source.Filesystem{KubeletRootDir: kubeletRoot, PodLogsDir: podLogs, WalkConcurrency: 1, Layers: tt.layers}
			exp, err := exporter.New(exporter.TestConfig(exporter.Config{NodeName: "node-1", Pods: watcher, Source: src, MeasureEphemeralStorage: true}))
			if err != nil {
				t.Fatal(err)
			}
			exp.Refresh(ctx)
			if err := testutil.CollectAndCompare(exp, strings.NewReader(tt.want),
				"emptydir_container_ephemeral_storage_part_bytes", "emptydir_container_writable_layer_unlocated"); err != nil {
				t.Error(err)
			}
		})
	}
}

// runtimePod is a running pod on node-1 whose one container, main, has an ephemeral-storage
// limit and runs under runtime ID id.
func runtimePod(ns, name, uid, id string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid)},
		Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "main",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("1Gi")}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "main", ContainerID: id,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}},
	}
}

func writeText(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
