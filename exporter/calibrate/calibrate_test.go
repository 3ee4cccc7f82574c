package calibrate

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/emptydir-guard/emptydir-guard/exporter/source"
	"github.com/emptydir-guard/emptydir-guard/internal/podcgroup"
)

const (
	ownUID = "0f1e2d3c-aaaa-bbbb-cccc-000000000001"
	ownCID = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
)

// ownPod is the exporter's pod of these tests: Burstable, its emptyDir "calibration" at dir.
func ownPod(dir string) *Pod {
	return &Pod{Namespace: "guard", Name: "exporter-x1", UID: ownUID, QOSClass: podcgroup.QOSBurstable,
		Container: "exporter", ContainerID: "containerd://" + ownCID, Volume: "calibration", VolumeDir: dir}
}

func mkdir(t *testing.T, parts ...string) string {
	t.Helper()
	dir := filepath.Join(parts...)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// writeMountInfo writes a mount table: each line "root mountpoint fstype superoptions".
func writeMountInfo(t *testing.T, lines ...string) string {
	t.Helper()
	var b strings.Builder
	for i, l := range lines {
		f := strings.Fields(l)
		fmt.Fprintf(&b, "%d 1 0:%d %s %s rw,relatime - %s none %s\n", 100+i, 40+i, f[0], f[1], f[2], f[3])
	}
	path := filepath.Join(t.TempDir(), "mountinfo")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// mismatches are r's mismatches as "setting reason found" strings.
func mismatches(r Result) []string {
	var s []string
	for _, m := range r.Mismatches {
		s = append(s, m.Setting+" "+m.Reason+" "+m.Found)
	}
	return s
}

func wantMismatches(t *testing.T, name string, r Result, want ...string) {
	t.Helper()
	if got := mismatches(r); !slices.Equal(got, want) {
		t.Errorf("%s: mismatches %q, want %q (%+v)", name, got, want, r.Mismatches)
	}
}

// TestKubeletRootDir: the exporter's emptyDir seen in its container must be the one below the
// configured root (same device and inode); the node's root comes from its bind's source in the
// mount table.
func TestKubeletRootDir(t *testing.T) {
	node := t.TempDir()
	root := filepath.Join(node, "kubelet")
	own := mkdir(t, root, "pods", ownUID, "volumes", "kubernetes.io~empty-dir", "calibration")
	// Another kubelet's root on the node that holds a directory of the same name, not the same one.
	other := filepath.Join(node, "stale")
	mkdir(t, other, "pods", ownUID, "volumes", "kubernetes.io~empty-dir", "calibration")
	mounts := writeMountInfo(t, "/var/lib/k0s/kubelet/pods/"+ownUID+"/volumes/kubernetes.io~empty-dir/calibration "+own+" ext4 rw")
	noBind := writeMountInfo(t, "/ / overlay rw")

	for _, tc := range []struct {
		name, root, mountInfo, volumeDir string
		want                             []string
		wantLayout                       string
	}{
		{"right root", root, mounts, own, nil, "/var/lib/k0s/kubelet"},
		{"no pod directory there", mkdir(t, node, "empty"), mounts, own,
			[]string{"kubelet.root-dir own_pod_not_found /var/lib/k0s/kubelet"}, "/var/lib/k0s/kubelet"},
		{"another directory there", other, mounts, own,
			[]string{"kubelet.root-dir other_directory /var/lib/k0s/kubelet"}, "/var/lib/k0s/kubelet"},
		{"no bind in the mount table", filepath.Join(node, "nowhere"), noBind, own,
			[]string{"kubelet.root-dir own_pod_not_found "}, ""},
		{"own emptyDir not mounted", root, mounts, filepath.Join(node, "missing"),
			[]string{"kubelet.root-dir unreadable "}, ""},
	} {
		r := Check(ownPod(tc.volumeDir), Settings{KubeletRootDir: tc.root, MountInfo: tc.mountInfo})
		wantMismatches(t, tc.name, r, tc.want...)
		if r.Layout.KubeletRootDir != tc.wantLayout {
			t.Errorf("%s: layout kubelet root %q, want %q", tc.name, r.Layout.KubeletRootDir, tc.wantLayout)
		}
	}
}

// TestPodLogsDir: the kubelet's pod logs directory holds the exporter container's own log directory.
func TestPodLogsDir(t *testing.T) {
	logs := t.TempDir()
	mkdir(t, logs, "guard_exporter-x1_"+ownUID, "exporter")
	file := t.TempDir()
	mkdir(t, file, "guard_exporter-x1_"+ownUID)
	if err := os.WriteFile(filepath.Join(file, "guard_exporter-x1_"+ownUID, "exporter"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, dir string
		want      []string
	}{
		{"right directory", logs, nil},
		{"an empty directory a hostPath created", t.TempDir(), []string{"kubelet.pod-logs-dir own_pod_not_found "}},
		{"a file where the directory is", file, []string{"kubelet.pod-logs-dir other_directory "}},
	} {
		r := Check(ownPod("/"), Settings{PodLogsDir: tc.dir})
		wantMismatches(t, tc.name, r, tc.want...)
		if wantDir := map[bool]string{true: tc.dir}[tc.want == nil]; r.Layout.PodLogsDir != wantDir {
			t.Errorf("%s: layout pod logs %q, want %q", tc.name, r.Layout.PodLogsDir, wantDir)
		}
	}
}

// TestCgroup: the exporter's own pod cgroup, in each layout and below nested roots, is located
// where the settings say, or found in the tree with the root and driver that put it there.
func TestCgroup(t *testing.T) {
	systemdUID := strings.ReplaceAll(ownUID, "-", "_")
	layouts := []struct {
		name, rel, root string
		driver          podcgroup.Driver
	}{
		{"cgroupfs", "kubepods/burstable/pod" + ownUID, "/", podcgroup.DriverCgroupfs},
		{"cgroupfs, nested root (a test cluster's)", "edg-1/nodes/kubepods/burstable/pod" + ownUID, "/edg-1/nodes", podcgroup.DriverCgroupfs},
		{"systemd", "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + systemdUID + ".slice", "/", podcgroup.DriverSystemd},
		{"systemd, kind's root /kubelet", "kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-burstable.slice/kubelet-kubepods-burstable-pod" + systemdUID + ".slice",
			"/kubelet", podcgroup.DriverSystemd},
		// k0s on a systemd host: cgroupfs beside systemd's own slices.
		{"cgroupfs beside system.slice", "kubepods/burstable/pod" + ownUID, "/", podcgroup.DriverCgroupfs},
	}
	for _, l := range layouts {
		base := t.TempDir()
		mkdir(t, base, "system.slice", "containerd.service")
		mkdir(t, base, "user.slice", "user-0.slice")
		mkdir(t, base, filepath.FromSlash(l.rel))
		open := func(cfg podcgroup.Config) (*podcgroup.Locator, error) {
			return podcgroup.NewLocatorAt(cfg, podcgroup.V1, base)
		}
		other := map[podcgroup.Driver]podcgroup.Driver{podcgroup.DriverCgroupfs: podcgroup.DriverSystemd, podcgroup.DriverSystemd: podcgroup.DriverCgroupfs}[l.driver]
		for _, tc := range []struct {
			root   string
			driver podcgroup.Driver
			want   []string
		}{
			{podcgroup.RootAuto, podcgroup.DriverAuto, nil},
			{podcgroup.RootAuto, l.driver, nil},
			{l.root, l.driver, nil},
			{l.root, podcgroup.DriverAuto, nil},
			{"/wrong", podcgroup.DriverAuto, []string{"cgroup.root own_pod_not_found " + l.root}},
			{l.root, other, []string{"cgroup.driver own_pod_not_found " + string(l.driver)}},
			{"/wrong", other, []string{"cgroup.root own_pod_not_found " + l.root, "cgroup.driver own_pod_not_found " + string(l.driver)}},
			{podcgroup.RootAuto, other, []string{"cgroup.driver own_pod_not_found " + string(l.driver)}},
		} {
			name := fmt.Sprintf("%s, configured %s %s", l.name, tc.root, tc.driver)
			r := Check(ownPod("/"), Settings{Cgroup: &podcgroup.Config{Root: tc.root, Driver: tc.driver}, OpenCgroups: open})
			wantMismatches(t, name, r, tc.want...)
			if r.Layout.CgroupRoot != l.root || r.Layout.CgroupDriver != string(l.driver) || r.Layout.CgroupVersion != "1" {
				t.Errorf("%s: layout %+v, want root %s, driver %s, v1", name, r.Layout, l.root, l.driver)
			}
		}
	}
}

// TestCgroupNotFound: a pod cgroup nowhere, or only where no kubelet puts one, is not found;
// in both layouts it is ambiguous; a hierarchy that cannot be opened names --cgroup.mount.
func TestCgroupNotFound(t *testing.T) {
	systemdUID := strings.ReplaceAll(ownUID, "-", "_")
	for _, tc := range []struct {
		name string
		dirs []string
		cfg  podcgroup.Config
		want []string
	}{
		{"no cgroup", []string{"kubepods/burstable"}, podcgroup.Config{Root: podcgroup.RootAuto},
			[]string{"cgroup.root own_pod_not_found "}},
		// The pod's name in a directory no root and driver make: under another QoS class, under a
		// directory not named kubepods, a systemd slice whose parents are not its prefixes.
		{"decoys", []string{"kubepods/besteffort/pod" + ownUID, "tenant/burstable/pod" + ownUID,
			"kubepods.slice/other.slice/kubepods-burstable-pod" + systemdUID + ".slice",
			// Below another pod's cgroup, as a privileged tenant could make it.
			"kubepods/besteffort/pod1/ctr/kubepods/burstable/pod" + ownUID}, podcgroup.Config{Root: "/"},
			[]string{"cgroup.root own_pod_not_found "}},
		{"deeper than the search goes", []string{"a/b/c/d/e/f/g/kubepods/burstable/pod" + ownUID}, podcgroup.Config{Root: podcgroup.RootAuto},
			[]string{"cgroup.root own_pod_not_found "}},
		{"both layouts", []string{"kubepods/burstable/pod" + ownUID, "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + systemdUID + ".slice"},
			podcgroup.Config{Root: podcgroup.RootAuto, Driver: podcgroup.DriverAuto}, []string{"cgroup.driver ambiguous "}},
		{"both layouts, root given", []string{"kubepods/burstable/pod" + ownUID, "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + systemdUID + ".slice"},
			podcgroup.Config{Root: "/", Driver: podcgroup.DriverAuto}, []string{"cgroup.driver ambiguous "}},
	} {
		base := t.TempDir()
		for _, d := range tc.dirs {
			mkdir(t, base, filepath.FromSlash(d))
		}
		open := func(cfg podcgroup.Config) (*podcgroup.Locator, error) {
			return podcgroup.NewLocatorAt(cfg, podcgroup.V2, base)
		}
		r := Check(ownPod("/"), Settings{Cgroup: &tc.cfg, OpenCgroups: open})
		wantMismatches(t, tc.name, r, tc.want...)
		if r.Layout.CgroupRoot != "" || r.Layout.CgroupDriver != "" {
			t.Errorf("%s: layout %+v, want no cgroup root nor driver", tc.name, r.Layout)
		}
	}
	r := Check(ownPod("/"), Settings{Cgroup: &podcgroup.Config{Root: podcgroup.RootAuto},
		OpenCgroups: func(podcgroup.Config) (*podcgroup.Locator, error) { return nil, errors.New("statfs: no such file") }})
	wantMismatches(t, "no hierarchy", r, "cgroup.mount unreadable ")
}

// TestWritableLayer: the layer the locator finds for the exporter's own container must be its
// own root filesystem's upperdir, and be there.
func TestWritableLayer(t *testing.T) {
	snapshotter := filepath.Join(t.TempDir(), "io.containerd.snapshotter.v1.overlayfs")
	upper := mkdir(t, snapshotter, "snapshots", "12", "fs")
	taskDir := filepath.Join(t.TempDir(), "io.containerd.runtime.v2.task")
	rootfs := filepath.Join(taskDir, "k8s.io", ownCID, "rootfs")
	table := func(ownUpper, taskUpper string) string {
		return writeMountInfo(t, "/ / overlay rw,lowerdir=/l1:/l2,upperdir="+ownUpper+",workdir=/w",
			"/ "+rootfs+" overlay rw,lowerdir=/l1:/l2,upperdir="+taskUpper+",workdir=/w")
	}
	mounts := table(upper, upper)
	for _, tc := range []struct {
		name, taskDir, snapshotter, mountInfo, id string
		want                                      []string
		skipped                                   string
	}{
		{"right directories", taskDir, snapshotter, mounts, "", nil, ""},
		{"wrong task dir", "/run/containerd/io.containerd.runtime.v2.task", snapshotter, mounts, "",
			[]string{"containerd.task-dir no_rootfs_mount "}, ""},
		{"wrong snapshotter root", taskDir, "/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs", mounts, "",
			[]string{"containerd.snapshotter-root outside_snapshotter " + snapshotter}, ""},
		{"another container's layer", taskDir, snapshotter, table(filepath.Join(snapshotter, "snapshots", "13", "fs"), upper), "",
			[]string{"containerd.snapshotter-root other_directory " + snapshotter}, ""},
		{"layer not mounted into the exporter", taskDir, snapshotter, table(filepath.Join(snapshotter, "snapshots", "14", "fs"), filepath.Join(snapshotter, "snapshots", "14", "fs")), "",
			[]string{"containerd.snapshotter-root own_pod_not_found " + snapshotter}, ""},
		{"own root filesystem no overlay", taskDir, snapshotter, writeMountInfo(t, "/ / ext4 rw"), "", nil, SkipNotOverlay},
		{"a runtime without a locator", taskDir, snapshotter, mounts, "kata://" + ownCID, nil, SkipOtherRuntime},
	} {
		p := ownPod("/")
		if tc.id != "" {
			p.ContainerID = tc.id
		}
		l := &source.LayerLocator{TaskDir: tc.taskDir, SnapshotterRoot: tc.snapshotter, MountInfo: tc.mountInfo}
		r := Check(p, Settings{Layers: l, MountInfo: tc.mountInfo})
		wantMismatches(t, tc.name, r, tc.want...)
		var skipped []Skip
		if tc.skipped != "" {
			skipped = []Skip{{SettingSnapshotterRoot, tc.skipped}}
		}
		if want := append(allSkipped(SkipNotConfigured, SettingSnapshotterRoot), skipped...); !slices.Equal(r.Skipped, want) {
			t.Errorf("%s: skipped %v, want %v", tc.name, r.Skipped, want)
		}
		if tc.want == nil && tc.skipped == "" && (r.Layout.ContainerdSnapshotterRoot != snapshotter || r.Layout.ContainerdTaskDir != taskDir) {
			t.Errorf("%s: layout %+v, want task dir %s, snapshotter root %s", tc.name, r.Layout, taskDir, snapshotter)
		}
	}
}

// ownLayer is the writable layer of the exporter's own container under CRI-O and Docker.
const ownLayer = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"

// crioStorage makes a containers/storage root where CRI-O's volatile record of container cid
// names layer, and that layer has its diff directory; it gives the root.
func crioStorage(t *testing.T, cid, layer string) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "storage")
	mkdir(t, root, "overlay", layer, "diff")
	for path, body := range map[string]string{
		filepath.Join(mkdir(t, root, "overlay-containers"), "volatile-containers.json"): `[{"id":"` + cid + `","layer":"` + layer + `"}]`,
		filepath.Join(mkdir(t, root, "overlay-layers"), "volatile-layers.json"):         `[{"id":"` + layer + `"}]`,
	} {
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// dockerRoot makes a Docker data-root where container cid's mount-id names layer, with its
// diff directory; it gives the root.
func dockerRoot(t *testing.T, cid, layer string) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "docker")
	mkdir(t, root, "overlay2", layer, "diff")
	if err := os.WriteFile(filepath.Join(mkdir(t, root, "image", "overlay2", "layerdb", "mounts", cid), "mount-id"), []byte(layer), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

// TestWritableLayerOtherRuntimes: under CRI-O and Docker, the layer the runtime's own metadata
// names for the exporter's container must be its root filesystem's upperdir (CRI-O's may be
// relative to its overlay directory); a root not set is named with the root found above that
// upperdir.
func TestWritableLayerOtherRuntimes(t *testing.T) {
	crio := crioStorage(t, ownCID, ownLayer)
	docker := dockerRoot(t, ownCID, ownLayer)
	ownRoot := func(upper string) string {
		return writeMountInfo(t, "/ / overlay rw,lowerdir=/l1:/l2,upperdir="+upper+",workdir=/w")
	}
	crioUpper := filepath.Join(crio, "overlay", ownLayer, "diff")
	dockerUpper := filepath.Join(docker, "overlay2", ownLayer, "diff")
	elsewhere := crioStorage(t, ownCID, strings.Repeat("a", 64))
	for _, tc := range []struct {
		name, runtime, mountInfo string
		crioRoot, dockerRoot     string
		want                     []string
		layout                   Layout
	}{
		{name: "CRI-O, its storage root", runtime: "cri-o", mountInfo: ownRoot(crioUpper), crioRoot: crio,
			layout: Layout{ContainerRuntime: "cri-o", CRIOStorageRoot: crio}},
		{name: "CRI-O, an upperdir relative to its overlay directory", runtime: "cri-o", mountInfo: ownRoot(ownLayer + "/diff"),
			crioRoot: crio, layout: Layout{ContainerRuntime: "cri-o"}},
		{name: "CRI-O, no storage root set", runtime: "cri-o", mountInfo: ownRoot(crioUpper),
			want: []string{"crio.storage-root not_set " + crio}, layout: Layout{ContainerRuntime: "cri-o", CRIOStorageRoot: crio}},
		{name: "CRI-O, a root without the container's record", runtime: "cri-o", mountInfo: ownRoot(crioUpper), crioRoot: t.TempDir(),
			want: []string{"crio.storage-root no_layer_record " + crio}, layout: Layout{ContainerRuntime: "cri-o", CRIOStorageRoot: crio}},
		{name: "CRI-O, another root naming another layer", runtime: "cri-o", mountInfo: ownRoot(crioUpper), crioRoot: elsewhere,
			want: []string{"crio.storage-root other_directory " + crio}, layout: Layout{ContainerRuntime: "cri-o", CRIOStorageRoot: crio}},
		{name: "Docker, its root", runtime: "docker", mountInfo: ownRoot(dockerUpper), dockerRoot: docker,
			layout: Layout{ContainerRuntime: "docker", DockerRoot: docker}},
		{name: "Docker, no root set", runtime: "docker", mountInfo: ownRoot(dockerUpper),
			want: []string{"docker.root not_set " + docker}, layout: Layout{ContainerRuntime: "docker", DockerRoot: docker}},
		{name: "Docker, another root", runtime: "docker", mountInfo: ownRoot(dockerUpper), dockerRoot: "/var/lib/docker-nowhere",
			want: []string{"docker.root no_layer_record " + docker}, layout: Layout{ContainerRuntime: "docker", DockerRoot: docker}},
	} {
		p := ownPod("/")
		p.ContainerID = tc.runtime + "://" + ownCID
		l := &source.LayerLocator{CRIOStorageRoot: tc.crioRoot, DockerRoot: tc.dockerRoot}
		r := Check(p, Settings{Layers: l, MountInfo: tc.mountInfo})
		wantMismatches(t, tc.name, r, tc.want...)
		if r.Layout != tc.layout {
			t.Errorf("%s: layout %+v, want %+v", tc.name, r.Layout, tc.layout)
		}
		if want := allSkipped(SkipNotConfigured, SettingSnapshotterRoot); !slices.Equal(r.Skipped, want) {
			t.Errorf("%s: skipped %v, want %v", tc.name, r.Skipped, want)
		}
	}
}

// allSkipped are the skips of every setting but except, for reason.
func allSkipped(reason string, except ...string) []Skip {
	var s []Skip
	for _, k := range SkipAll(reason).Skipped {
		if !slices.Contains(except, k.Setting) {
			s = append(s, k)
		}
	}
	return s
}

// TestSkipped: without its own pod nothing is checked, and a setting not in use is not either.
func TestSkipped(t *testing.T) {
	if r := Check(nil, Settings{KubeletRootDir: "/var/lib/kubelet", PodLogsDir: "/var/log/pods"}); len(r.Mismatches) > 0 ||
		!slices.Equal(r.Skipped, []Skip{{SettingKubeletRootDir, SkipNoOwnPod}, {SettingPodLogsDir, SkipNoOwnPod},
			{SettingCgroupRoot, SkipNotConfigured}, {SettingSnapshotterRoot, SkipNotConfigured}}) {
		t.Errorf("no own pod: %+v", r)
	}
	if r := Check(ownPod("/"), Settings{}); len(r.Mismatches) > 0 || !slices.Equal(r.Skipped, allSkipped(SkipNotConfigured)) {
		t.Errorf("nothing configured: %+v", r)
	}
}
