//go:build linux

package source_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/emptydir-guard/emptydir-guard/exporter/exportertest"
	"github.com/emptydir-guard/emptydir-guard/exporter/part"
	"github.com/emptydir-guard/emptydir-guard/exporter/source"
)

const (
	ctrStable   = "c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1"
	ctrVolatile = "c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2c2"
	ctrUnknown  = "c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3"
	layerImage  = "a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0"
	layerStable = "a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1"
	layerVolat  = "a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2"
	layerNoDir  = "a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3"
)

// crioNode is a node's containers/storage graph root (/var/lib/containers/storage) laid out as
// the overlay driver lays it out: the records of containers and layers, each layer's directory
// with its diff, link and lower, the l/ directory of short links.
type crioNode struct {
	root       string
	containers []map[string]any // containers.json
	volatile   []map[string]any // volatile-containers.json, where CRI-O's containers go
	layers     []map[string]any // layers.json (the image's)
	volLayers  []map[string]any // volatile-layers.json (the volatile containers')
}

func newCRIONode(t *testing.T) *crioNode {
	t.Helper()
	n := &crioNode{root: filepath.Join(t.TempDir(), "var", "lib", "containers", "storage")}
	ctr := func(id, layer string, volatile bool) map[string]any {
		meta, _ := json.Marshal(map[string]any{"pod-name": "k8s_p_ns_uid_0", "pod-id": strings.Repeat("f", 64), "image-name": "registry.example/app:1",
			"image-id": strings.Repeat("e", 64), "name": "k8s_main_p_ns_uid_0", "created-at": 1796540000, "mountlabel": ""})
		flags := map[string]any{"MountLabel": "", "ProcessLabel": ""}
		if volatile {
			flags["Volatile"] = true
		}
		return map[string]any{"id": id, "names": []string{"k8s_main_p_ns_uid_0"}, "image": strings.Repeat("e", 64), "layer": layer,
			"metadata": string(meta), "created": "2026-12-06T10:00:00.000000000Z", "flags": flags}
	}
	// A container podman made (stable), one CRI-O made (volatile), and one whose layer has no
	// record; the image's layer is a layer of no container.
	n.containers = []map[string]any{ctr(ctrStable, layerStable, false)}
	n.volatile = []map[string]any{ctr(ctrVolatile, layerVolat, true), ctr(strings.Repeat("c4", 32), strings.Repeat("a4", 32), true)}
	n.layers = []map[string]any{
		{"id": layerImage, "created": "2026-12-01T00:00:00Z", "compressed-diff-digest": "sha256:" + strings.Repeat("1", 64),
			"compressed-size": 3 << 20, "diff-digest": "sha256:" + strings.Repeat("2", 64), "diff-size": 8 << 20, "compression": 2, "uidset": []int{0}, "gidset": []int{0}},
		{"id": layerStable, "parent": layerImage, "created": "2026-12-06T10:00:00Z"},
	}
	n.volLayers = []map[string]any{
		{"id": layerVolat, "parent": layerImage, "created": "2026-12-06T10:00:00Z", "flags": map[string]any{"Volatile": true}},
		{"id": layerNoDir, "parent": layerImage, "created": "2026-12-06T10:00:00Z"},
	}
	for _, id := range []string{layerImage, layerStable, layerVolat} {
		dir := filepath.Join(n.root, "overlay", id)
		for _, sub := range []string{"diff", "work", "merged"} {
			mkdir(t, filepath.Join(dir, sub))
		}
		short := strings.ToUpper(id[:26])
		writeText(t, filepath.Join(dir, "link"), short)
		if id != layerImage {
			writeText(t, filepath.Join(dir, "lower"), "l/"+strings.ToUpper(layerImage[:26]))
		}
		mkdir(t, filepath.Join(n.root, "overlay", "l"))
		if err := os.Symlink(filepath.Join("..", id, "diff"), filepath.Join(n.root, "overlay", "l", short)); err != nil {
			t.Fatal(err)
		}
	}
	n.write(t)
	return n
}

// write writes the four JSON files as containers/storage does: arrays of records.
func (n *crioNode) write(t *testing.T) {
	t.Helper()
	for path, records := range map[string][]map[string]any{
		"overlay-containers/containers.json": n.containers, "overlay-containers/volatile-containers.json": n.volatile,
		"overlay-layers/layers.json": n.layers, "overlay-layers/volatile-layers.json": n.volLayers,
	} {
		b, err := json.Marshal(records)
		if err != nil {
			t.Fatal(err)
		}
		writeText(t, filepath.Join(n.root, path), string(b))
	}
}

func (n *crioNode) diff(layer string) string { return filepath.Join(n.root, "overlay", layer, "diff") }

func TestCRIOLayers(t *testing.T) {
	tests := []struct {
		name   string
		id     string
		off    bool                        // no --crio.storage-root
		change func(*testing.T, *crioNode) // the node's files, changed from newCRIONode's
		want   string                      // the layer whose diff is located
		reason string
	}{
		{name: "a container of containers.json", id: ctrStable, want: layerStable},
		{name: "a volatile container, as CRI-O makes them", id: ctrVolatile, want: layerVolat},
		{name: "without --crio.storage-root: as before, another runtime", id: ctrVolatile, off: true, reason: source.LayerOtherRuntime},
		{name: "an ID CRI-O does not make", id: "../../../etc", reason: source.LayerOtherRuntime},
		{name: "a container of no record", id: ctrUnknown, reason: source.LayerNoLayerRecord},
		{name: "a layer of no record", id: strings.Repeat("c4", 32), reason: source.LayerNoLayerRecord},
		{name: "no volatile file yet", id: ctrVolatile, reason: source.LayerNoLayerRecord, change: func(_ *testing.T, n *crioNode) {
			mustRemove(n.root, "overlay-containers/volatile-containers.json")
		}},
		{name: "a layer record with no directory", id: ctrVolatile, reason: source.LayerNoLayerDir, change: func(t *testing.T, n *crioNode) {
			n.volatile[0]["layer"] = layerNoDir
			n.write(t)
		}},
		{name: "the layer field escaping with ..", id: ctrVolatile, reason: source.LayerBadMetadata, change: func(t *testing.T, n *crioNode) {
			n.volatile[0]["layer"] = "../../../../../etc"
			n.volLayers = append(n.volLayers, map[string]any{"id": "../../../../../etc"})
			n.write(t)
		}},
		{name: "the layer field naming a directory of another", id: ctrVolatile, reason: source.LayerBadMetadata, change: func(t *testing.T, n *crioNode) {
			n.volatile[0]["layer"] = layerImage + "/diff/.."
			n.write(t)
		}},
		{name: "a symlinked diff directory", id: ctrVolatile, reason: source.LayerNoLayerDir, change: func(_ *testing.T, n *crioNode) {
			mustRemove(n.root, "overlay/"+layerVolat+"/diff")
			mustSymlink("/etc", filepath.Join(n.root, "overlay", layerVolat, "diff"))
		}},
		{name: "a symlinked layer directory", id: ctrVolatile, reason: source.LayerNoLayerDir, change: func(_ *testing.T, n *crioNode) {
			mustRemove(n.root, "overlay/"+layerVolat)
			mustSymlink(filepath.Join(n.root, "overlay", layerImage), filepath.Join(n.root, "overlay", layerVolat))
		}},
		{name: "a file where diff should be", id: ctrVolatile, reason: source.LayerNoLayerDir, change: func(_ *testing.T, n *crioNode) {
			mustRemove(n.root, "overlay/"+layerVolat+"/diff")
			mustWrite(filepath.Join(n.root, "overlay", layerVolat, "diff"), "")
		}},
		{name: "malformed containers.json", id: ctrVolatile, reason: source.LayerBadMetadata, change: func(_ *testing.T, n *crioNode) {
			mustWrite(filepath.Join(n.root, "overlay-containers", "containers.json"), `[{"id": "`+ctrStable+`", "layer": `)
		}},
		{name: "malformed volatile-layers.json", id: ctrVolatile, reason: source.LayerBadMetadata, change: func(_ *testing.T, n *crioNode) {
			mustWrite(filepath.Join(n.root, "overlay-layers", "volatile-layers.json"), `{"id": "x"}`)
		}},
		{name: "containers.json over the size cap", id: ctrVolatile, reason: source.LayerBadMetadata, change: func(_ *testing.T, n *crioNode) {
			mustPad(filepath.Join(n.root, "overlay-containers", "containers.json"), 16<<20+1)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newCRIONode(t)
			if tt.change != nil {
				tt.change(t, n)
			}
			l := &source.LayerLocator{CRIOStorageRoot: n.root}
			if tt.off {
				l.CRIOStorageRoot = ""
			}
			got, err := l.WritableLayer("cri-o://" + tt.id)
			checkLayer(t, got, err, n.diff(tt.want), tt.reason)
		})
	}
}

// A container CRI-O starts after a reading is found: the locator reads the records again for a
// container they did not hold.
func TestCRIOLayerOfANewContainer(t *testing.T) {
	n := newCRIONode(t)
	l := &source.LayerLocator{CRIOStorageRoot: n.root}
	if _, err := l.WritableLayer("cri-o://" + ctrVolatile); err != nil {
		t.Fatal(err)
	}
	n.volatile = append(n.volatile, map[string]any{"id": ctrUnknown, "layer": layerStable})
	n.write(t)
	got, err := l.WritableLayer("cri-o://" + ctrUnknown)
	checkLayer(t, got, err, n.diff(layerStable), "")
}

const (
	mountMain = "d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1d1"
	mountBase = "d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0"
)

// dockerNode is dockerd's data-root (/var/lib/docker) with the overlay2 driver: the layerdb's
// record of the container's mount (mount-id, init-id, parent) and the layer directories, the
// container's own beside its -init layer.
type dockerNode struct{ root string }

func newDockerNode(t *testing.T) *dockerNode {
	t.Helper()
	n := &dockerNode{root: filepath.Join(t.TempDir(), "var", "lib", "docker")}
	for _, id := range []string{mountBase, mountMain, mountMain + "-init"} {
		for _, sub := range []string{"diff", "work"} {
			mkdir(t, filepath.Join(n.root, "overlay2", id, sub))
		}
		writeText(t, filepath.Join(n.root, "overlay2", id, "link"), strings.ToUpper(id[:26]))
	}
	n.record(t, ctrStable, mountMain)
	return n
}

// record writes the layerdb's record of container cid's mount, mount-id holding mountID as
// Docker writes it, bare.
func (n *dockerNode) record(t *testing.T, cid, mountID string) {
	t.Helper()
	dir := filepath.Join(n.root, "image", "overlay2", "layerdb", "mounts", cid)
	writeText(t, filepath.Join(dir, "mount-id"), mountID)
	writeText(t, filepath.Join(dir, "init-id"), mountID+"-init")
	writeText(t, filepath.Join(dir, "parent"), "sha256:"+strings.Repeat("3", 64))
}

func (n *dockerNode) diff(mountID string) string {
	return filepath.Join(n.root, "overlay2", mountID, "diff")
}

func TestDockerLayers(t *testing.T) {
	tests := []struct {
		name   string
		id     string
		off    bool
		change func(*testing.T, *dockerNode)
		want   string // the mount ID whose diff is located
		reason string
	}{
		{name: "the container's mount", id: ctrStable, want: mountMain},
		{name: "a mount-id ending in a newline", id: ctrStable, want: mountMain, change: func(t *testing.T, n *dockerNode) {
			n.record(t, ctrStable, mountMain+"\n")
		}},
		{name: "without --docker.root: as before, another runtime", id: ctrStable, off: true, reason: source.LayerOtherRuntime},
		{name: "an ID Docker does not make", id: "../../etc", reason: source.LayerOtherRuntime},
		{name: "a container of no mount record (containerd image store, another driver)", id: ctrUnknown, reason: source.LayerNoLayerRecord},
		{name: "a mount-id escaping with ..", id: ctrStable, reason: source.LayerBadMetadata, change: func(t *testing.T, n *dockerNode) {
			n.record(t, ctrStable, "../../../../etc")
		}},
		{name: "a mount-id naming the -init layer", id: ctrStable, reason: source.LayerBadMetadata, change: func(t *testing.T, n *dockerNode) {
			n.record(t, ctrStable, mountMain+"-init")
		}},
		{name: "a mount-id with no directory", id: ctrStable, reason: source.LayerNoLayerDir, change: func(t *testing.T, n *dockerNode) {
			n.record(t, ctrStable, strings.Repeat("d9", 32))
		}},
		{name: "a symlinked diff directory", id: ctrStable, reason: source.LayerNoLayerDir, change: func(_ *testing.T, n *dockerNode) {
			mustRemove(n.root, "overlay2/"+mountMain+"/diff")
			mustSymlink("/", n.diff(mountMain))
		}},
		{name: "a symlinked layer directory", id: ctrStable, reason: source.LayerNoLayerDir, change: func(_ *testing.T, n *dockerNode) {
			mustRemove(n.root, "overlay2/"+mountMain)
			mustSymlink(filepath.Join(n.root, "overlay2", mountBase), filepath.Join(n.root, "overlay2", mountMain))
		}},
		{name: "a mount-id over the size cap", id: ctrStable, reason: source.LayerBadMetadata, change: func(_ *testing.T, n *dockerNode) {
			mustWrite(filepath.Join(n.root, "image", "overlay2", "layerdb", "mounts", ctrStable, "mount-id"), mountMain+strings.Repeat(" ", 4<<10))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newDockerNode(t)
			if tt.change != nil {
				tt.change(t, n)
			}
			l := &source.LayerLocator{DockerRoot: n.root}
			if tt.off {
				l.DockerRoot = ""
			}
			got, err := l.WritableLayer("docker://" + tt.id)
			checkLayer(t, got, err, n.diff(tt.want), tt.reason)
		})
	}
}

// checkLayer checks WritableLayer's answer: wantDir, or a LayerError of reason when one is set.
func checkLayer(t *testing.T, got string, err error, wantDir, reason string) {
	t.Helper()
	var le *source.LayerError
	switch {
	case reason == "" && (err != nil || got != wantDir):
		t.Errorf("WritableLayer = %q, %v; want %s", got, err, wantDir)
	case reason != "" && !errors.As(err, &le):
		t.Errorf("WritableLayer = %q, %v; want a LayerError %s", got, err, reason)
	case reason != "" && le.Reason != reason:
		t.Errorf("reason %s (%v), want %s", le.Reason, err, reason)
	}
}

// The layers CRI-O and Docker keep are walked as containerd's are, and agree with GNU du on
// the diff directory; the image's layer below is not counted.
func TestRuntimeLayersMeasureLikeDu(t *testing.T) {
	crio, docker := newCRIONode(t), newDockerNode(t)
	writeFile(t, filepath.Join(crio.diff(layerImage), "usr", "bin", "app"), 2<<20)
	writeFile(t, filepath.Join(crio.diff(layerVolat), "tmp", "cache.bin"), 3<<20+5)
	writeFile(t, filepath.Join(crio.diff(layerVolat), "var", "log", "app.log"), 70<<10)
	writeFile(t, filepath.Join(docker.diff(mountBase), "usr", "bin", "app"), 2<<20)
	writeFile(t, filepath.Join(docker.diff(mountMain+"-init"), "etc", "hostname"), 12)
	writeFile(t, filepath.Join(docker.diff(mountMain), "data", "out.bin"), 5<<20+3)
	src := &source.Filesystem{KubeletRootDir: t.TempDir(), PodLogsDir: t.TempDir(), WalkConcurrency: 2,
		Layers: &source.LayerLocator{CRIOStorageRoot: crio.root, DockerRoot: docker.root}}
	pod := part.Pod{Namespace: "a", Pod: "p", UID: "u"}
	for _, tc := range []struct{ id, dir string }{
		{"cri-o://" + ctrVolatile, crio.diff(layerVolat)},
		{"docker://" + ctrStable, docker.diff(mountMain)},
	} {
		v := part.Part{Name: "container/main/writable-layer", Kind: part.KindWritableLayer, Container: "main", ContainerID: tc.id}
		m, err := src.MeasurePart(context.Background(), pod, v, nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.id, err)
		}
		if gnu := exportertest.DuBytes(t, tc.dir); m.UsedBytes != gnu || m.LowerBound() || m.Method != part.MethodWalk || m.Unlocated != "" {
			t.Errorf("%s: %d bytes (lower bound %v, method %s, unlocated %q), GNU du says %d", tc.id, m.UsedBytes, m.LowerBound(), m.Method, m.Unlocated, gnu)
		}
	}
}

func mkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

func writeText(t *testing.T, path, text string) {
	t.Helper()
	mkdir(t, filepath.Dir(path))
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The must* helpers change a fixture inside a table's change func; they panic, as a broken
// fixture is the test's own bug.
func mustRemove(root, rel string) {
	if err := os.RemoveAll(filepath.Join(root, rel)); err != nil {
		panic(err)
	}
}

func mustSymlink(target, link string) {
	if err := os.Symlink(target, link); err != nil {
		panic(err)
	}
}

func mustWrite(path, text string) {
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		panic(err)
	}
}

// mustPad makes path size bytes long with spaces after its JSON, which stays valid: only the
// cap refuses it.
func mustPad(path string, size int) {
	b, err := os.ReadFile(path)
	if err != nil {
		panic(err)
	}
	mustWrite(path, string(b)+strings.Repeat(" ", size-len(b)))
}

// The dedicated image filesystem is judged on a directory the chart mounts: CRI-O's and Docker's
// roots are not mounted themselves, only directories below them.
func TestImageFilesystemDir(t *testing.T) {
	for _, tc := range []struct {
		l    *source.LayerLocator
		want string
	}{
		{&source.LayerLocator{SnapshotterRoot: "/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs"}, "/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs"},
		{&source.LayerLocator{SnapshotterRoot: "/s", CRIOStorageRoot: "/var/lib/containers/storage"}, "/var/lib/containers/storage/overlay"},
		{&source.LayerLocator{SnapshotterRoot: "/s", DockerRoot: "/var/lib/docker/"}, "/var/lib/docker/overlay2"},
	} {
		if got := tc.l.ImageFilesystemDir(); got != tc.want {
			t.Errorf("ImageFilesystemDir = %q, want %q", got, tc.want)
		}
	}
}
