//go:build linux

package source_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/emptydir-guard/emptydir-guard/exporter/exportertest"
	"github.com/emptydir-guard/emptydir-guard/exporter/part"
	"github.com/emptydir-guard/emptydir-guard/exporter/source"
)

const (
	volScratch = "abababababababababababababababababababababababababababababababab"
	volCache   = "cdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcd"
	volOther   = "efefefefefefefefefefefefefefefefefefefefefefefefefefefefefefefef"
)

// imageVolumeNode is a layerNode whose containerd also has the CRI plugin's container directory,
// with container layerOK's bundle naming its image VOLUME directories as containerd does.
type imageVolumeNode struct {
	*layerNode
	criContainers string
}

func newImageVolumeNode(t *testing.T) *imageVolumeNode {
	t.Helper()
	n := &imageVolumeNode{layerNode: newLayerNode(t)}
	n.criContainers = filepath.Join(filepath.Dir(n.snapshotter), "io.containerd.grpc.v1.cri", "containers")
	n.locator.CRIContainersDir = n.criContainers
	return n
}

// volumeDir is the directory containerd binds for image VOLUME vid of container cid.
func (n *imageVolumeNode) volumeDir(cid, vid string) string {
	return filepath.Join(n.criContainers, cid, "volumes", vid)
}

// bundle writes container cid's config.json with mounts (OCI mount objects).
func (n *imageVolumeNode) bundle(t *testing.T, cid string, mounts ...map[string]any) {
	t.Helper()
	writeBundle(t, n.task, cid, mounts...)
}

// writeBundle writes the config.json of container cid's OCI bundle in containerd's task dir,
// with mounts (OCI mount objects).
func writeBundle(t *testing.T, taskDir, cid string, mounts ...map[string]any) {
	t.Helper()
	if mounts == nil {
		mounts = []map[string]any{}
	}
	b, err := json.Marshal(map[string]any{"ociVersion": "1.2.0", "root": map[string]any{"path": "rootfs"}, "mounts": mounts})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(taskDir, "k8s.io", cid)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func bind(dst, src string) map[string]any {
	return map[string]any{"destination": dst, "type": "bind", "source": src, "options": []string{"rbind", "rprivate", "rw"}}
}

// A container whose image has VOLUMEs no Kubernetes mount covers writes them outside its
// overlay: containerd binds <cri containers>/<id>/volumes/<random> there, and the kubelet counts
// it nowhere. The exporter counts each such directory its bundle names in the container's writable
// layer, and nothing the bundle names otherwise: not a Kubernetes volume's bind, not another
// container's directory, not a path that only matches once ".." is taken as written.
func TestWritableLayerCountsImageVolumes(t *testing.T) {
	n := newImageVolumeNode(t)
	upper := filepath.Join(n.snapshotter, "snapshots", "7", "fs")
	writeFile(t, filepath.Join(upper, "fill"), 1<<20)
	writeFile(t, filepath.Join(n.volumeDir(layerOK, volScratch), "fill"), 3<<20)
	writeFile(t, filepath.Join(n.volumeDir(layerOK, volCache), "a", "b"), 512<<10)
	// Another container's directory (named by a bind of this bundle) and a directory of this
	// container's no bind names: neither is this container's image volume.
	writeFile(t, filepath.Join(n.volumeDir(layerElse, volOther), "fill"), 5<<20)
	writeFile(t, filepath.Join(n.volumeDir(layerOK, volOther), "fill"), 7<<20)
	emptyDir := t.TempDir()
	writeFile(t, filepath.Join(emptyDir, "fill"), 9<<20)
	n.bundle(t, layerOK,
		map[string]any{"destination": "/proc", "type": "proc", "source": "proc"},
		bind("/data", emptyDir),
		bind("/scratch", n.volumeDir(layerOK, volScratch)),
		bind("/var/cache", n.volumeDir(layerOK, volCache)),
		// The same directory twice counts once.
		bind("/scratch2", n.volumeDir(layerOK, volScratch)),
		bind("/other", n.volumeDir(layerElse, volOther)),
		bind("/escape", n.volumeDir(layerOK, volScratch)+"/../../../"+layerElse+"/volumes/"+volOther),
		// Not a bind: a tmpfs whose source only looks like a volume directory.
		map[string]any{"destination": "/t", "type": "tmpfs", "source": n.volumeDir(layerOK, volOther)},
	)

	src := &source.Filesystem{KubeletRootDir: t.TempDir(), PodLogsDir: t.TempDir(), WalkConcurrency: 2, Layers: n.locator}
	pod := part.Pod{Namespace: "a", Pod: "p", UID: "u"}
	v := part.Part{Name: "container/main/writable-layer", Kind: part.KindWritableLayer, Container: "main", ContainerID: "containerd://" + layerOK}
	m, err := src.MeasurePart(context.Background(), pod, v, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := exportertest.DuBytes(t, upper) + exportertest.DuBytes(t, n.volumeDir(layerOK, volScratch)) + exportertest.DuBytes(t, n.volumeDir(layerOK, volCache))
	if m.UsedBytes != want || m.LowerBound() || m.Unlocated != "" || m.Method != part.MethodWalk {
		t.Errorf("writable layer with image volumes: %d bytes (lower bound %v, unlocated %q, method %s), want %d: the layer's and its two VOLUME directories' (GNU du), nothing else",
			m.UsedBytes, m.LowerBound(), m.Unlocated, m.Method, want)
	}
	live, err := src.MeasurePartLive(context.Background(), pod, v, nil)
	if err != nil || live.UsedBytes != want {
		t.Errorf("live: %d bytes, %v; want %d", live.UsedBytes, err, want)
	}

	// A container without image volumes: its layer alone, exact.
	n.bundle(t, layerShadow, bind("/data", emptyDir))
	v.ContainerID = "containerd://" + layerShadow
	if m, err := src.MeasurePart(context.Background(), pod, v, nil); err != nil || m.LowerBound() ||
		m.UsedBytes != exportertest.DuBytes(t, filepath.Join(n.snapshotter, "snapshots", "8", "fs")) {
		t.Errorf("no image volume: %+v, %v; want the layer alone, exact", m, err)
	}
}

// Where a container's image VOLUME directories cannot be walked, its layer is walked alone and
// said to be a lower bound, with the reason: never a silent 0 for the directories.
func TestImageVolumesUnlocated(t *testing.T) {
	n := newImageVolumeNode(t)
	upper := filepath.Join(n.snapshotter, "snapshots", "7", "fs")
	writeFile(t, filepath.Join(upper, "fill"), 1<<20)
	layer := exportertest.DuBytes(t, upper)
	tests := []struct {
		name   string
		setup  func(t *testing.T, l *source.LayerLocator)
		reason string
	}{
		{"the directory is not mounted (flag off)", func(t *testing.T, l *source.LayerLocator) {
			n.bundle(t, layerOK, bind("/scratch", n.volumeDir(layerOK, volScratch)))
			l.CRIContainersDir = ""
		}, source.LayerImageVolumeNotMounted},
		{"the directory is missing", func(t *testing.T, l *source.LayerLocator) {
			n.bundle(t, layerOK, bind("/scratch", "/var/lib/containerd/io.containerd.grpc.v1.cri/containers/"+layerOK+"/volumes/"+volCache))
		}, source.LayerImageVolumeMissing},
		{"a file where the directory should be", func(t *testing.T, l *source.LayerLocator) {
			writeFile(t, n.volumeDir(layerOK, volOther), 10)
			n.bundle(t, layerOK, bind("/scratch", n.volumeDir(layerOK, volOther)))
		}, source.LayerImageVolumeMissing},
		{"no bundle", func(t *testing.T, l *source.LayerLocator) {
			if err := os.Remove(filepath.Join(n.task, "k8s.io", layerOK, "config.json")); err != nil {
				t.Fatal(err)
			}
		}, source.LayerNoBundleConfig},
		{"a bundle that is no JSON", func(t *testing.T, l *source.LayerLocator) {
			if err := os.WriteFile(filepath.Join(n.task, "k8s.io", layerOK, "config.json"), []byte(strings.Repeat("{", 10)), 0o644); err != nil {
				t.Fatal(err)
			}
		}, source.LayerNoBundleConfig},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := &source.LayerLocator{TaskDir: n.task, SnapshotterRoot: n.snapshotter, MountInfo: n.locator.MountInfo, CRIContainersDir: n.criContainers}
			tt.setup(t, l)
			src := &source.Filesystem{KubeletRootDir: t.TempDir(), PodLogsDir: t.TempDir(), WalkConcurrency: 2, Layers: l}
			v := part.Part{Name: "container/main/writable-layer", Kind: part.KindWritableLayer, Container: "main", ContainerID: "containerd://" + layerOK}
			m, err := src.MeasurePart(context.Background(), part.Pod{Namespace: "a", Pod: "p", UID: "u"}, v, nil)
			if err != nil || m.Unlocated != tt.reason || !m.LowerBound() || m.UsedBytes != layer || m.Method != part.MethodWalk {
				t.Errorf("got %+v, %v; want the layer's %d bytes, a lower bound, unlocated %s", m, err, layer, tt.reason)
			}
		})
	}
}
