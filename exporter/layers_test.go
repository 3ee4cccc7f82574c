//go:build linux

package exporter_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/emptydir-guard/emptydir-guard/exporter"
)

const (
	layerOK      = "1111111111111111111111111111111111111111111111111111111111111111"
	layerElse    = "2222222222222222222222222222222222222222222222222222222222222222"
	layerTmpfs   = "3333333333333333333333333333333333333333333333333333333333333333"
	layerEscape  = "4444444444444444444444444444444444444444444444444444444444444444"
	layerMissing = "5555555555555555555555555555555555555555555555555555555555555555"
	layerShadow  = "6666666666666666666666666666666666666666666666666666666666666666"
)

// layerNode is a node's containerd as the exporter sees it: a task folder, a snapshotter
// root with snapshots, and a mount table naming them.
type layerNode struct {
	task, snapshotter string
	locator           *exporter.LayerLocator
}

func newLayerNode(t *testing.T) *layerNode {
	t.Helper()
	root := t.TempDir()
	// A space in the path: the mount table escapes it (\040).
	n := &layerNode{task: filepath.Join(root, "run dir", "io.containerd.runtime.v2.task"), snapshotter: filepath.Join(root, "lib", "io.containerd.snapshotter.v1.overlayfs")}
	for _, s := range []string{"7", "8"} {
		if err := os.MkdirAll(filepath.Join(n.snapshotter, "snapshots", s, "fs"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	rootfs := func(id string) string {
		return strings.ReplaceAll(filepath.Join(n.task, "k8s.io", id, "rootfs"), " ", `\040`)
	}
	table := strings.Join([]string{
		"22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw",
		fmt.Sprintf("501 22 0:90 / %s rw,relatime shared:250 - overlay overlay rw,lowerdir=%s/snapshots/3/fs:%s/snapshots/2/fs,upperdir=%s/snapshots/7/fs,workdir=%s/snapshots/7/work",
			rootfs(layerOK), n.snapshotter, n.snapshotter, n.snapshotter, n.snapshotter),
		// An overlay whose upper directory is no snapshot of this snapshotter.
		fmt.Sprintf("502 22 0:91 / %s rw shared:251 - overlay overlay rw,lowerdir=/x,upperdir=/etc,workdir=/tmp/w", rootfs(layerElse)),
		fmt.Sprintf("503 22 0:92 / %s rw shared:252 - tmpfs tmpfs rw", rootfs(layerTmpfs)),
		// A path that only looks like a snapshot until cleaned.
		fmt.Sprintf("504 22 0:93 / %s rw shared:253 - overlay overlay rw,lowerdir=/x,upperdir=%s/snapshots/7/fs/../../../../../etc,workdir=/tmp/w", rootfs(layerEscape), n.snapshotter),
		// A later mount over the same point hides the earlier one.
		fmt.Sprintf("505 22 0:94 / %s rw shared:254 - overlay overlay rw,lowerdir=/x,upperdir=%s/snapshots/7/fs,workdir=/tmp/w", rootfs(layerShadow), n.snapshotter),
		fmt.Sprintf("506 505 0:95 / %s rw shared:255 - overlay overlay rw,lowerdir=/x,upperdir=%s/snapshots/8/fs,workdir=/tmp/w", rootfs(layerShadow), n.snapshotter),
	}, "\n") + "\n"
	mountInfo := filepath.Join(root, "mountinfo")
	if err := os.WriteFile(mountInfo, []byte(table), 0o644); err != nil {
		t.Fatal(err)
	}
	n.locator = &exporter.LayerLocator{TaskDir: n.task, SnapshotterRoot: n.snapshotter, MountInfo: mountInfo}
	return n
}

func TestLayerLocator(t *testing.T) {
	n := newLayerNode(t)
	tests := []struct {
		name, id, want, reason string
	}{
		{name: "containerd overlay", id: "containerd://" + layerOK, want: filepath.Join(n.snapshotter, "snapshots", "7", "fs")},
		{name: "the mount on top", id: "containerd://" + layerShadow, want: filepath.Join(n.snapshotter, "snapshots", "8", "fs")},
		{name: "upperdir outside the snapshotter", id: "containerd://" + layerElse, reason: exporter.LayerOutsideSnapshotter},
		{name: "upperdir escaping with ..", id: "containerd://" + layerEscape, reason: exporter.LayerOutsideSnapshotter},
		{name: "not an overlay", id: "containerd://" + layerTmpfs, reason: exporter.LayerNotOverlay},
		{name: "no rootfs mount", id: "containerd://" + layerMissing, reason: exporter.LayerNoRootfsMount},
		{name: "another runtime", id: "cri-o://" + layerOK, reason: exporter.LayerOtherRuntime},
		{name: "not an ID containerd makes", id: "containerd://../../etc", reason: exporter.LayerOtherRuntime},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := n.locator.UpperDir(tt.id)
			var le *exporter.LayerError
			switch {
			case tt.reason == "" && err != nil:
				t.Fatalf("UpperDir: %v", err)
			case tt.reason == "" && got != tt.want:
				t.Errorf("UpperDir = %q, want %q", got, tt.want)
			case tt.reason != "" && !errors.As(err, &le):
				t.Fatalf("UpperDir = %q, %v; want a LayerError %s", got, err, tt.reason)
			case tt.reason != "" && le.Reason != tt.reason:
				t.Errorf("reason = %s (%v), want %s", le.Reason, err, tt.reason)
			}
		})
	}
}

// The writable layer is walked as an emptyDir is, and agrees with GNU du on the upper
// directory: sparse files by their blocks, hard links once, whiteouts as nothing.
func TestWritableLayerMeasuresLikeDu(t *testing.T) {
	n := newLayerNode(t)
	upper := filepath.Join(n.snapshotter, "snapshots", "7", "fs")
	writeFile(t, filepath.Join(upper, "var", "log", "app.log"), 300<<10)
	writeFile(t, filepath.Join(upper, "data.bin"), 1<<20)
	if err := os.Link(filepath.Join(upper, "data.bin"), filepath.Join(upper, "data.link")); err != nil {
		t.Fatal(err)
	}
	sparse, err := os.Create(filepath.Join(upper, "sparse"))
	if err != nil {
		t.Fatal(err)
	}
	if err := sparse.Truncate(64 << 20); err != nil {
		t.Fatal(err)
	}
	sparse.Close()
	// An overlay whiteout (a deleted lower file) is a 0/0 character device; only root makes one.
	if err := unix.Mknod(filepath.Join(upper, "deleted"), unix.S_IFCHR, 0); err != nil && !errors.Is(err, unix.EPERM) {
		t.Fatal(err)
	}
	src := &exporter.FilesystemSource{KubeletRootDir: t.TempDir(), PodLogsDir: t.TempDir(), WalkConcurrency: 2, Layers: n.locator}
	pod := exporter.PodVolumes{Namespace: "a", Pod: "p", UID: "u"}
	v := exporter.Volume{Name: "container/main/writable-layer", Kind: exporter.KindWritableLayer, Container: "main", ContainerID: "containerd://" + layerOK}
	m, err := src.MeasureVolume(context.Background(), pod, v, nil)
	if err != nil {
		t.Fatal(err)
	}
	if gnu := duBytes(t, upper); m.UsedBytes != gnu || m.LowerBound() || m.Method != exporter.MethodWalk {
		t.Errorf("writable layer: %d bytes (lower bound %v, method %s), GNU du says %d", m.UsedBytes, m.LowerBound(), m.Method, gnu)
	}

	v.ContainerID = "containerd://" + layerElse
	m, err = src.MeasureVolume(context.Background(), pod, v, nil)
	if err != nil || m.Unlocated != exporter.LayerOutsideSnapshotter || m.UsedBytes != 0 || !m.LowerBound() {
		t.Errorf("unlocated layer: %+v, %v; want no error, unlocated %s, a lower bound of 0", m, err, exporter.LayerOutsideSnapshotter)
	}
}

// Logs and the pod's own files are counted as the kubelet counts them: each file directly in
// the folder by its blocks, rotated ones included, subfolders left out, links not followed.
func TestLogsAndPodFiles(t *testing.T) {
	root, logs := t.TempDir(), t.TempDir()
	pod := exporter.PodVolumes{Namespace: "shop", Pod: "cart-0", UID: "0f0e0d0c-0000-4000-8000-000000000001"}
	podLogs := filepath.Join(logs, "shop_cart-0_"+pod.UID)
	main := filepath.Join(podLogs, "main")
	counted := []string{
		writeFile(t, filepath.Join(main, "0.log"), 200<<10),
		writeFile(t, filepath.Join(main, "0.log.20261204-031500"), 1<<20),
		writeFile(t, filepath.Join(main, "0.log.20261204-031000.gz"), 70<<10),
	}
	writeFile(t, filepath.Join(main, "not-a-log-folder", "big"), 4<<20) // the kubelet skips folders
	if err := os.Symlink("/etc/passwd", filepath.Join(main, "link")); err != nil {
		t.Fatal(err)
	}
	var want int64
	for _, f := range counted {
		want += duBytes(t, f)
	}
	src := &exporter.FilesystemSource{KubeletRootDir: root, PodLogsDir: logs, WalkConcurrency: 2}
	m, err := src.MeasureVolume(context.Background(), pod, exporter.Volume{Name: "container/main/logs", Kind: exporter.KindContainerLogs, Container: "main"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m.UsedBytes != want || m.InodesUsed != 4 || m.Method != exporter.MethodFiles {
		t.Errorf("logs: %d bytes, %d inodes, method %s; want %d (the three files by du, the link as itself), 4", m.UsedBytes, m.InodesUsed, m.Method, want)
	}

	files := exporter.Volume{Name: "pod/files", Kind: exporter.KindPodFiles}
	if err := os.MkdirAll(filepath.Join(root, "pods", pod.UID), 0o750); err != nil {
		t.Fatal(err)
	}
	m, err = src.MeasureVolume(context.Background(), pod, files, nil)
	if err != nil || m.UsedBytes != 0 {
		t.Errorf("pod files without etc-hosts nor own log files: %d bytes, %v; want 0", m.UsedBytes, err)
	}
	hosts := writeFile(t, filepath.Join(root, "pods", pod.UID, "etc-hosts"), 3000)
	own := writeFile(t, filepath.Join(podLogs, "sandbox.log"), 9000)
	m, err = src.MeasureVolume(context.Background(), pod, files, nil)
	if want := duBytes(t, hosts) + duBytes(t, own); err != nil || m.UsedBytes != want {
		t.Errorf("pod files: %d bytes, %v; want etc-hosts and the file beside the container folders, %d", m.UsedBytes, err, want)
	}

	_, err = src.MeasureVolume(context.Background(), pod, exporter.Volume{Name: "container/gone/logs", Kind: exporter.KindContainerLogs, Container: "gone"}, nil)
	var me *exporter.MeasureError
	if !errors.As(err, &me) || me.Reason != exporter.ReasonNotFound {
		t.Errorf("logs of a container without a folder: %v, want a not_found error", err)
	}
}

// writeFile writes size bytes of data to path, making its folder, and returns path.
func writeFile(t *testing.T, path string, size int) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, make([]byte, size), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// A layer the walk cannot locate takes the kubelet's Summary figure, with the kubelet's time,
// where the exporter may ask it; it stays unlocated, so its pod's usage a lower bound.
func TestUnlocatedLayerFromTheKubeletSummary(t *testing.T) {
	stamped := time.Date(2026, 12, 4, 3, 0, 0, 0, time.UTC)
	summary := fmt.Sprintf(`{"node": {"nodeName": "node-1"}, "pods": [{"podRef": {"name": "p", "namespace": "a", "uid": "u"},
		"containers": [{"name": "main", "rootfs": {"time": %q, "usedBytes": 11534336}}]}]}`, stamped.Format(time.RFC3339))
	requests := 0
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		requests++
		_, _ = w.Write([]byte(summary))
	}))
	defer ts.Close()
	n := newLayerNode(t)
	src := &exporter.FilesystemSource{KubeletRootDir: t.TempDir(), PodLogsDir: t.TempDir(), WalkConcurrency: 2, Layers: n.locator,
		LayerFallback: exporter.NewKubeletDirectSource(ts.URL, ts.Client())}
	pod := exporter.PodVolumes{Namespace: "a", Pod: "p", UID: "u"}
	v := exporter.Volume{Name: "container/main/writable-layer", Kind: exporter.KindWritableLayer, Container: "main", ContainerID: "cri-o://" + layerOK}
	m, err := src.MeasureVolume(context.Background(), pod, v, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m.UsedBytes != 11534336 || m.Method != exporter.MethodKubelet || !m.MeasuredAt.Equal(stamped) || m.Unlocated != exporter.LayerOtherRuntime || !m.LowerBound() {
		t.Errorf("got %+v; want the kubelet's 11534336 bytes stamped %s, method kubelet, still unlocated (other_runtime)", m, stamped)
	}
	// A container the Summary does not know yet: 0, as without the kubelet.
	v.Container = "sidecar"
	if m, err := src.MeasureVolume(context.Background(), pod, v, nil); err != nil || m.UsedBytes != 0 || m.Method != exporter.MethodNone {
		t.Errorf("a container the kubelet has no figure for: %+v, %v; want 0, method none", m, err)
	}
	if requests != 1 {
		t.Errorf("%d Summary requests for two layers within moments, want 1", requests)
	}
}
