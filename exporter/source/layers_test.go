//go:build linux

package source_test

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

	"github.com/emptydir-guard/emptydir-guard/exporter/exportertest"
	"github.com/emptydir-guard/emptydir-guard/exporter/part"
	"github.com/emptydir-guard/emptydir-guard/exporter/source"
)

const (
	layerOK      = "1111111111111111111111111111111111111111111111111111111111111111"
	layerElse    = "2222222222222222222222222222222222222222222222222222222222222222"
	layerTmpfs   = "3333333333333333333333333333333333333333333333333333333333333333"
	layerEscape  = "4444444444444444444444444444444444444444444444444444444444444444"
	layerMissing = "5555555555555555555555555555555555555555555555555555555555555555"
	layerShadow  = "6666666666666666666666666666666666666666666666666666666666666666"
)

// layerNode is a node's containerd as the exporter sees it: a task directory, a snapshotter
// root with snapshots, and a mount table naming them.
type layerNode struct {
	task, snapshotter string
	locator           *source.LayerLocator
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
	n.locator = &source.LayerLocator{TaskDir: n.task, SnapshotterRoot: n.snapshotter, MountInfo: mountInfo}
	for _, id := range []string{layerOK, layerShadow} { // the bundles beside the root filesystems
		writeBundle(t, n.task, id)
	}
	return n
}

func TestLayerLocator(t *testing.T) {
	n := newLayerNode(t)
	tests := []struct {
		name, id, want, reason string
	}{
		{name: "containerd overlay", id: "containerd://" + layerOK, want: filepath.Join(n.snapshotter, "snapshots", "7", "fs")},
		{name: "the mount on top", id: "containerd://" + layerShadow, want: filepath.Join(n.snapshotter, "snapshots", "8", "fs")},
		{name: "upperdir outside the snapshotter", id: "containerd://" + layerElse, reason: source.LayerOutsideSnapshotter},
		{name: "upperdir escaping with ..", id: "containerd://" + layerEscape, reason: source.LayerOutsideSnapshotter},
		{name: "not an overlay", id: "containerd://" + layerTmpfs, reason: source.LayerNotOverlay},
		{name: "no rootfs mount", id: "containerd://" + layerMissing, reason: source.LayerNoRootfsMount},
		{name: "another runtime", id: "cri-o://" + layerOK, reason: source.LayerOtherRuntime},
		{name: "not an ID containerd makes", id: "containerd://../../etc", reason: source.LayerOtherRuntime},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := n.locator.WritableLayer(tt.id)
			var le *source.LayerError
			switch {
			case tt.reason == "" && err != nil:
				t.Fatalf("WritableLayer: %v", err)
			case tt.reason == "" && got != tt.want:
				t.Errorf("WritableLayer = %q, want %q", got, tt.want)
			case tt.reason != "" && !errors.As(err, &le):
				t.Fatalf("WritableLayer = %q, %v; want a LayerError %s", got, err, tt.reason)
			case tt.reason != "" && le.Reason != tt.reason:
				t.Errorf("reason = %s (%v), want %s", le.Reason, err, tt.reason)
			}
		})
	}
}

const (
	layerNative      = "7777777777777777777777777777777777777777777777777777777777777777"
	layerNativeSub   = "8888888888888888888888888888888888888888888888888888888888888888"
	layerNativeElse  = "9999999999999999999999999999999999999999999999999999999999999999"
	layerNativeOther = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	layerDevmapper   = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

// nativeLocator is a locator over a mount table (lines, where %[1]s stands for the native
// snapshotter root and %[2]s for the task directory's k8s.io namespace) in which containerd's
// native snapshotter bind-mounts each root filesystem from <root>/snapshots/<n>, whole.
func nativeLocator(t *testing.T, native bool, lines ...string) (*source.LayerLocator, string) {
	t.Helper()
	root := t.TempDir()
	l := &source.LayerLocator{TaskDir: filepath.Join(root, "run", "io.containerd.runtime.v2.task"),
		SnapshotterRoot: filepath.Join(root, "lib", "io.containerd.snapshotter.v1.overlayfs"), MountInfo: filepath.Join(root, "mountinfo")}
	nativeRoot := filepath.Join(root, "lib", "io.containerd.snapshotter.v1.native")
	if native {
		l.NativeSnapshotterRoot = nativeRoot
	}
	table := strings.NewReplacer("%[1]s", nativeRoot, "%[2]s", filepath.Join(l.TaskDir, "k8s.io")).Replace(strings.Join(lines, "\n") + "\n")
	if err := os.WriteFile(l.MountInfo, []byte(table), 0o644); err != nil {
		t.Fatal(err)
	}
	writeBundle(t, l.TaskDir, layerNative)
	return l, nativeRoot
}

// containerd's native snapshotter (where overlayfs is not available) gives each container a
// full copy of its image in <root>/snapshots/<n>, bind-mounted as its root filesystem; the
// kubelet counts that directory whole (the snapshotter's Usage). The mount table names the bind's
// source by its path within its filesystem: located only on the filesystem that holds the
// native root, as a snapshot directly below it.
func TestLayerLocatorNativeSnapshotter(t *testing.T) {
	type want struct{ id, dir, reason string }
	tests := []struct {
		name   string
		native bool
		lines  []string
		want   []want
	}{
		{name: "the exporter's pod: the native root is a hostPath of a filesystem mounted apart on the node", native: true,
			lines: []string{
				"22 1 0:50 / / rw - overlay overlay rw,lowerdir=/l,upperdir=/u,workdir=/w",
				"600 22 8:2 /lib/containerd/io.containerd.snapshotter.v1.native %[1]s ro,relatime - xfs /dev/sdb1 rw",
				"601 22 8:2 /lib/containerd/io.containerd.snapshotter.v1.native/snapshots/9 %[2]s/" + layerNative + "/rootfs rw,relatime - xfs /dev/sdb1 rw",
				// A directory within a snapshot, and another directory of the same filesystem.
				"602 22 8:2 /lib/containerd/io.containerd.snapshotter.v1.native/snapshots/9/sub %[2]s/" + layerNativeSub + "/rootfs rw - xfs /dev/sdb1 rw",
				"603 22 8:2 /lib/containerd/etc %[2]s/" + layerNativeElse + "/rootfs rw - xfs /dev/sdb1 rw",
				// The same path on another filesystem is another directory.
				"604 22 8:3 /lib/containerd/io.containerd.snapshotter.v1.native/snapshots/9 %[2]s/" + layerNativeOther + "/rootfs rw - ext4 /dev/sdc1 rw",
				// runc with the devmapper snapshotter: the thin device's filesystem itself.
				"605 22 253:5 / %[2]s/" + layerDevmapper + "/rootfs rw - ext4 /dev/mapper/containerd-pool-snap-12 rw",
			},
			want: []want{
				{id: layerNative, dir: "snapshots/9"},
				{id: layerNativeSub, reason: source.LayerOutsideSnapshotter},
				{id: layerNativeElse, reason: source.LayerOutsideSnapshotter},
				{id: layerNativeOther, reason: source.LayerNotOverlay},
				{id: layerDevmapper, reason: source.LayerNotOverlay},
			}},
		{name: "on the node itself: the native root is a directory of the root filesystem", native: true,
			lines: []string{
				"22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw",
				"601 22 8:1 %[1]s/snapshots/12 %[2]s/" + layerNative + "/rootfs rw,relatime shared:1 - ext4 /dev/sda1 rw",
			},
			want: []want{{id: layerNative, dir: "snapshots/12"}}},
		{name: "without --containerd.native-snapshotter-root", native: false,
			lines: []string{
				"22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw",
				"601 22 8:1 %[1]s/snapshots/12 %[2]s/" + layerNative + "/rootfs rw,relatime shared:1 - ext4 /dev/sda1 rw",
			},
			want: []want{{id: layerNative, reason: source.LayerNotOverlay}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, nativeRoot := nativeLocator(t, tt.native, tt.lines...)
			for _, w := range tt.want {
				got, err := l.WritableLayer("containerd://" + w.id)
				var le *source.LayerError
				switch {
				case w.reason == "" && (err != nil || got != filepath.Join(nativeRoot, w.dir)):
					t.Errorf("%s: %q, %v; want %s", w.id[:4], got, err, filepath.Join(nativeRoot, w.dir))
				case w.reason != "" && !errors.As(err, &le):
					t.Errorf("%s: %q, %v; want a LayerError %s", w.id[:4], got, err, w.reason)
				case w.reason != "" && le.Reason != w.reason:
					t.Errorf("%s: reason %s (%v), want %s", w.id[:4], le.Reason, err, w.reason)
				}
			}
		})
	}
}

// A native snapshot is walked whole, image copy and writes, as containerd's Usage counts it
// (fs.DiskUsage of the directory): the figure the kubelet compares.
func TestNativeSnapshotMeasuresLikeDu(t *testing.T) {
	l, nativeRoot := nativeLocator(t, true,
		"22 1 0:50 / / rw - overlay overlay rw,lowerdir=/l,upperdir=/u,workdir=/w",
		"600 22 8:2 /io.containerd.snapshotter.v1.native %[1]s ro - xfs /dev/sdb1 rw",
		"601 22 8:2 /io.containerd.snapshotter.v1.native/snapshots/3 %[2]s/"+layerNative+"/rootfs rw - xfs /dev/sdb1 rw")
	snapshot := filepath.Join(nativeRoot, "snapshots", "3")
	writeFile(t, filepath.Join(snapshot, "bin", "app"), 700<<10) // copied from the image
	writeFile(t, filepath.Join(snapshot, "tmp", "written"), 2<<20)
	writeFile(t, filepath.Join(nativeRoot, "snapshots", "4", "other"), 1<<20) // another container's
	src := &source.Filesystem{KubeletRootDir: t.TempDir(), PodLogsDir: t.TempDir(), WalkConcurrency: 2, Layers: l}
	v := part.Part{Name: "container/main/writable-layer", Kind: part.KindWritableLayer, Container: "main", ContainerID: "containerd://" + layerNative}
	m, err := src.MeasurePart(context.Background(), part.Pod{Namespace: "a", Pod: "p", UID: "u"}, v, nil)
	if err != nil {
		t.Fatal(err)
	}
	if gnu := exportertest.DuBytes(t, snapshot); m.UsedBytes != gnu || m.LowerBound() || m.Method != part.MethodWalk {
		t.Errorf("native snapshot: %d bytes (lower bound %v, unlocated %q, method %s), GNU du says %d", m.UsedBytes, m.LowerBound(), m.Unlocated, m.Method, gnu)
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
	src := &source.Filesystem{KubeletRootDir: t.TempDir(), PodLogsDir: t.TempDir(), WalkConcurrency: 2, Layers: n.locator}
	pod := part.Pod{Namespace: "a", Pod: "p", UID: "u"}
	v := part.Part{Name: "container/main/writable-layer", Kind: part.KindWritableLayer, Container: "main", ContainerID: "containerd://" + layerOK}
	m, err := src.MeasurePart(context.Background(), pod, v, nil)
	if err != nil {
		t.Fatal(err)
	}
	if gnu := exportertest.DuBytes(t, upper); m.UsedBytes != gnu || m.LowerBound() || m.Method != part.MethodWalk {
		t.Errorf("writable layer: %d bytes (lower bound %v, method %s), GNU du says %d", m.UsedBytes, m.LowerBound(), m.Method, gnu)
	}

	v.ContainerID = "containerd://" + layerElse
	m, err = src.MeasurePart(context.Background(), pod, v, nil)
	if err != nil || m.Unlocated != source.LayerOutsideSnapshotter || m.UsedBytes != 0 || !m.LowerBound() {
		t.Errorf("unlocated layer: %+v, %v; want no error, unlocated %s, a lower bound of 0", m, err, source.LayerOutsideSnapshotter)
	}
}

// Logs and the pod's own files are counted as the kubelet counts them: each file directly in
// the directory by its blocks, rotated ones included, subdirectories left out, links not followed.
func TestLogsAndPodFiles(t *testing.T) {
	root, logs := t.TempDir(), t.TempDir()
	pod := part.Pod{Namespace: "shop", Pod: "cart-0", UID: "0f0e0d0c-0000-4000-8000-000000000001"}
	podLogs := filepath.Join(logs, "shop_cart-0_"+pod.UID)
	main := filepath.Join(podLogs, "main")
	counted := []string{
		writeFile(t, filepath.Join(main, "0.log"), 200<<10),
		writeFile(t, filepath.Join(main, "0.log.20261204-031500"), 1<<20),
		writeFile(t, filepath.Join(main, "0.log.20261204-031000.gz"), 70<<10),
	}
	writeFile(t, filepath.Join(main, "not-a-log-directory", "big"), 4<<20) // the kubelet skips directories
	if err := os.Symlink("/etc/passwd", filepath.Join(main, "link")); err != nil {
		t.Fatal(err)
	}
	var want int64
	for _, f := range counted {
		want += exportertest.DuBytes(t, f)
	}
	src := &source.Filesystem{KubeletRootDir: root, PodLogsDir: logs, WalkConcurrency: 2}
	m, err := src.MeasurePart(context.Background(), pod, part.Part{Name: "container/main/logs", Kind: part.KindContainerLogs, Container: "main"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m.UsedBytes != want || m.InodesUsed != 4 || m.Method != part.MethodFiles {
		t.Errorf("logs: %d bytes, %d inodes, method %s; want %d (the three files by du, the link as itself), 4", m.UsedBytes, m.InodesUsed, m.Method, want)
	}

	files := part.Part{Name: "pod/files", Kind: part.KindPodFiles}
	if err := os.MkdirAll(filepath.Join(root, "pods", pod.UID), 0o750); err != nil {
		t.Fatal(err)
	}
	m, err = src.MeasurePart(context.Background(), pod, files, nil)
	if err != nil || m.UsedBytes != 0 {
		t.Errorf("pod files without etc-hosts nor own log files: %d bytes, %v; want 0", m.UsedBytes, err)
	}
	hosts := writeFile(t, filepath.Join(root, "pods", pod.UID, "etc-hosts"), 3000)
	own := writeFile(t, filepath.Join(podLogs, "sandbox.log"), 9000)
	m, err = src.MeasurePart(context.Background(), pod, files, nil)
	if want := exportertest.DuBytes(t, hosts) + exportertest.DuBytes(t, own); err != nil || m.UsedBytes != want {
		t.Errorf("pod files: %d bytes, %v; want etc-hosts and the file beside the container directories, %d", m.UsedBytes, err, want)
	}

	_, err = src.MeasurePart(context.Background(), pod, part.Part{Name: "container/gone/logs", Kind: part.KindContainerLogs, Container: "gone"}, nil)
	var me *part.MeasureError
	if !errors.As(err, &me) || me.Reason != part.ReasonNotFound {
		t.Errorf("logs of a container without a directory: %v, want a not_found error", err)
	}
}

// writeFile writes size bytes of data to path, making its directory, and returns path.
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
	src := &source.Filesystem{KubeletRootDir: t.TempDir(), PodLogsDir: t.TempDir(), WalkConcurrency: 2, Layers: n.locator,
		LayerFallback: source.NewKubeletDirect(ts.URL, ts.Client())}
	pod := part.Pod{Namespace: "a", Pod: "p", UID: "u"}
	v := part.Part{Name: "container/main/writable-layer", Kind: part.KindWritableLayer, Container: "main", ContainerID: "cri-o://" + layerOK}
	m, err := src.MeasurePart(context.Background(), pod, v, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m.UsedBytes != 11534336 || m.Method != part.MethodKubelet || !m.MeasuredAt.Equal(stamped) || m.Unlocated != source.LayerOtherRuntime || !m.LowerBound() {
		t.Errorf("got %+v; want the kubelet's 11534336 bytes stamped %s, method kubelet, still unlocated (other_runtime)", m, stamped)
	}
	// A container the Summary does not know yet: 0, as without the kubelet.
	v.Container = "sidecar"
	if m, err := src.MeasurePart(context.Background(), pod, v, nil); err != nil || m.UsedBytes != 0 || m.Method != part.MethodNone {
		t.Errorf("a container the kubelet has no figure for: %+v, %v; want 0, method none", m, err)
	}
	if requests != 1 {
		t.Errorf("%d Summary requests for two layers within moments, want 1", requests)
	}
}
