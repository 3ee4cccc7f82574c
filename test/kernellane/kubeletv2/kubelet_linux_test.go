package kubeletv2

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/emptydir-guard/emptydir-guard/exporter/calibrate"
	"github.com/emptydir-guard/emptydir-guard/exporter/change"
	"github.com/emptydir-guard/emptydir-guard/exporter/part"
	"github.com/emptydir-guard/emptydir-guard/exporter/source"
	"github.com/emptydir-guard/emptydir-guard/internal/podcgroup"
	"github.com/emptydir-guard/emptydir-guard/test/cluster"
)

const (
	// laneEnv is set to 1 by the lane's v2 boot (KERNEL_LANE_CGROUP2=1 of lane.sh); kubeletEnv
	// names the kubelet binary the lane copied in (KERNEL_LANE_PROGRAMS).
	laneEnv    = "KERNEL_LANE_CGROUP2"
	kubeletEnv = "KERNEL_LANE_KUBELET"

	cgroupMount = "/sys/fs/cgroup"
	// nodeDisk is where the kubelet's and containerd's roots live: ext4 on a blank disk of the
	// lane's, one per layout, where v2 charges a pod's written-back pages to its cgroup.
	nodeDisk     = "/var/lib"
	manifestsDir = "/etc/kubernetes/manifests"
	// settle outlasts the memory controller's 2 s stats flush: a snapshot read sooner may not
	// show a write just done (internal/podcgroup's tests).
	settle = 2500 * time.Millisecond
	// waitLimit bounds the waits for containerd and the pods under emulation (about a minute).
	waitLimit = 5 * time.Minute
)

// layout is how the kubelet of one run makes its pod cgroups, with the settings calibration
// must name as wrong on it.
type layout struct {
	driver podcgroup.Driver
	// root is the kubelet's --cgroup-root, in the cgroupfs form.
	root        string
	wrongRoot   string
	wrongDriver podcgroup.Driver
	// disk indexes KERNEL_LANE_SCRATCH_DEVICES: the node's /var/lib of this run.
	disk int
}

// layouts run in turn in one boot under systemd: first the cgroupfs driver, as k0s runs it on
// systemd hosts, at kind's --cgroup-root /kubelet, not "/", so that calibration has a root to
// find that the defaults do not name; then the systemd driver at kubeadm's root "/", the layout
// of most cgroup v2 nodes.
var layouts = []layout{
	{driver: podcgroup.DriverCgroupfs, root: "/kubelet", wrongRoot: "/", wrongDriver: podcgroup.DriverSystemd, disk: 0},
	{driver: podcgroup.DriverSystemd, root: "/", wrongRoot: "/kubelet", wrongDriver: podcgroup.DriverCgroupfs, disk: 1},
}

// podDir is where the kubelet puts the pod's cgroup, written out as its documentation says
// rather than with the product's own naming code.
func (l layout) podDir(p *staticPod) string {
	var parts []string
	if l.root != "/" {
		parts = strings.Split(strings.TrimPrefix(l.root, "/"), "/")
	}
	parts = append(parts, "kubepods")
	if p.qos != podcgroup.QOSGuaranteed {
		parts = append(parts, strings.ToLower(p.qos))
	}
	if l.driver == podcgroup.DriverCgroupfs {
		return filepath.Join(append(append([]string{cgroupMount}, parts...), "pod"+p.uid)...)
	}
	// systemd: one slice per level, named by every component down to it joined by "-", the
	// "-" of each component written as "_" (kubepods-burstable-pod<uid>.slice).
	parts = append(parts, "pod"+strings.ReplaceAll(p.uid, "-", "_"))
	dir, name := cgroupMount, ""
	for i, c := range parts {
		if i > 0 {
			name += "-"
		}
		name += c
		dir = filepath.Join(dir, name+".slice")
	}
	return dir
}

// staticPod is one of the kubelet's static pods: one container, named as the pod, with a disk
// emptyDir at /data.
type staticPod struct {
	name, qos string
	resources map[string]any
	// Found on the node: the kubelet's UID (the manifest's hash), the container's ID and PID.
	uid, cid string
	pid      int
}

// newPods are the three static pods, one per QoS class, found on the node once running.
func newPods() []*staticPod {
	return []*staticPod{
		{name: "guaranteed", qos: podcgroup.QOSGuaranteed, resources: map[string]any{"limits": map[string]string{"cpu": "100m", "memory": "64Mi"}}},
		// The exporter's own pod for the calibration: Burstable, as the chart's DaemonSet.
		{name: "burstable", qos: podcgroup.QOSBurstable, resources: map[string]any{"requests": map[string]string{"memory": "16Mi"}}},
		{name: "besteffort", qos: podcgroup.QOSBestEffort},
	}
}

// TestKubeletV2StaticPods runs a standalone kubelet (static pods from a manifest directory) on
// containerd and runc on the lane's v2-only kernel under systemd, once per layout (the cgroupfs
// driver with --cgroup-root /kubelet, then the systemd driver with runc's systemd cgroups), and
// checks against the pod cgroups it made: calibration finds the root and driver from one pod's
// cgroup and names each wrong setting; the change signal, opened as the exporter opens it,
// locates every pod by its kubelet UID (each container's own process is in the cgroup found),
// vouches for disk emptyDirs and writable layers and not for memory ones; a pod's write (an
// emptyDir, its writable layer) changes its mark, with the bytes in its own io.stat and in no
// other pod's, and while no pod writes (idle, a read of cached files) no mark changes.
func TestKubeletV2StaticPods(t *testing.T) {
	if os.Getenv(laneEnv) != "1" {
		t.Skip("runs in the kernel lane's cgroup v2 boot (make test-kernel-lane), where it starts a kubelet as the VM's root")
	}
	for _, l := range layouts {
		t.Run(string(l.driver), func(t *testing.T) { testKubelet(t, l) })
	}
}

// testKubelet runs the kubelet in layout l and checks the calibration and the change signal
// against its pods.
func testKubelet(t *testing.T, l layout) {
	pods := newPods()
	startNode(t, l, pods)
	own := pods[1]

	t.Run("calibration", func(t *testing.T) {
		auto := podcgroup.Config{Mount: cgroupMount, Root: podcgroup.RootAuto, Driver: podcgroup.DriverAuto}
		found := calibrate.Layout{CgroupVersion: "2", CgroupDriver: string(l.driver), CgroupRoot: l.root}
		for _, tc := range []struct {
			name string
			cfg  podcgroup.Config
			want []calibrate.Mismatch
		}{
			{"auto", auto, nil},
			{"right", podcgroup.Config{Mount: cgroupMount, Root: l.root, Driver: l.driver}, nil},
			{"wrong root", podcgroup.Config{Mount: cgroupMount, Root: l.wrongRoot, Driver: podcgroup.DriverAuto},
				[]calibrate.Mismatch{{Setting: calibrate.SettingCgroupRoot, Reason: calibrate.ReasonOwnPodNotFound, Found: l.root}}},
			{"wrong driver", podcgroup.Config{Mount: cgroupMount, Root: l.root, Driver: l.wrongDriver},
				[]calibrate.Mismatch{{Setting: calibrate.SettingCgroupDriver, Reason: calibrate.ReasonOwnPodNotFound, Found: string(l.driver)}}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r := calibrate.Check(&calibrate.Pod{Namespace: "default", Name: own.name + "-lane", UID: own.uid, QOSClass: own.qos}, calibrate.Settings{Cgroup: &tc.cfg})
				if r.Layout != found {
					t.Errorf("layout %+v, want %+v", r.Layout, found)
				}
				var got []calibrate.Mismatch
				for _, m := range r.Mismatches {
					t.Logf("mismatch %s %s found %q: %v", m.Setting, m.Reason, m.Found, m.Err)
					got = append(got, calibrate.Mismatch{Setting: m.Setting, Reason: m.Reason, Found: m.Found})
				}
				if !slices.Equal(got, tc.want) {
					t.Errorf("mismatches %+v, want %+v", got, tc.want)
				}
			})
		}
	})

	// The exporter's --cgroup.root=auto: the root calibration found, the driver probed.
	cfg := podcgroup.Config{Mount: cgroupMount, Root: l.root, Driver: podcgroup.DriverAuto}
	fsys := source.DefaultFilesystem()
	signal, err := change.NewCgroup(cfg, change.Dirs{
		Pods:         filepath.Join(fsys.KubeletRootDir, "pods"),
		Layers:       fsys.Layers.SnapshotterRoot,
		ImageVolumes: fsys.Layers.CRIContainersDir,
	})
	if err != nil {
		t.Fatal(err)
	}
	loc, err := podcgroup.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	located := t.Run("locate", func(t *testing.T) {
		if v := signal.Version(); v != podcgroup.V2 {
			t.Errorf("the signal reads cgroup v%d, want v2", v)
		}
		for _, tc := range []struct {
			v    part.Part
			want bool
		}{
			{part.Part{Name: "data", Kind: part.KindEmptyDir, Medium: part.MediumDisk}, true},
			{part.Part{Name: "shm", Kind: part.KindEmptyDir, Medium: part.MediumMemory}, false},
			{part.Part{Kind: part.KindWritableLayer, Container: "app"}, true},
		} {
			if got := signal.Vouches(tc.v); got != tc.want {
				t.Errorf("Vouches(%s) = %v, want %v", tc.v.Describe(), got, tc.want)
			}
		}
		for _, p := range pods {
			pod, err := loc.Locate(p.uid, p.qos)
			if err != nil {
				t.Errorf("%s: %v", p.name, err)
				continue
			}
			want := l.podDir(p)
			if pod.Dir != want || pod.Driver != l.driver {
				t.Errorf("%s: located %s (%s), want %s (%s)", p.name, pod.Dir, pod.Driver, want, l.driver)
			}
			// The container's own process, as the kernel places it.
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", p.pid))
			if err != nil {
				t.Fatal(err)
			}
			in := filepath.Join(cgroupMount, strings.TrimPrefix(strings.TrimSpace(string(b)), "0::"))
			t.Logf("%s: its container's process %d is in %s", p.name, p.pid, in)
			if !strings.HasPrefix(in, pod.Dir+"/") {
				t.Errorf("%s: its container's process %d is in %s, not below %s", p.name, p.pid, in, pod.Dir)
			}
			f, err := loc.Find(p.uid, p.qos)
			if err != nil || f.Dir != want || f.Root != l.root {
				t.Errorf("%s: Find = %+v, %v; want %s below root %s", p.name, f, err, want, l.root)
			}
		}
	})
	if !located {
		t.FailNow()
	}

	t.Run("marks", func(t *testing.T) {
		marks := func() []any {
			var m []any
			for _, p := range pods {
				// As the API shows a static pod: its mirror's UID, the kubelet's in the annotation.
				mark, err := signal.Mark(part.Pod{Namespace: "default", Pod: p.name + "-lane", UID: "0e3c0a58-6f8d-4a4e-9a57-2b7c1a3e9f00",
					ConfigHash: p.uid, QOSClass: p.qos})
				if err != nil {
					t.Fatalf("%s: %v", p.name, err)
				}
				m = append(m, mark.Counters())
			}
			return m
		}
		const written = 1 << 20 // each write: 1 MiB, fsynced
		type op struct {
			name string
			pod  *staticPod // nil: nothing runs
			sh   string
			want outcome
		}
		var ops []op
		ops = append(ops, op{name: "idle", want: noneChanges})
		for _, p := range pods {
			ops = append(ops,
				op{p.name + " writes its emptyDir", p, "dd if=/dev/zero of=/data/w bs=64k count=16 conv=fsync 2>/dev/null", writerChanges},
				op{p.name + " writes its writable layer", p, "dd if=/dev/zero of=/w bs=64k count=16 conv=fsync 2>/dev/null", writerChanges},
				// The first read after a write updates the files' atime (relatime): an inode-table
				// page, charged to whichever pod's process read it into the page cache first, is
				// dirtied. Any pod's mark may move (an extra walk); logged only.
				op{p.name + " reads what it wrote", p, "cat /data/w /w >/dev/null", anyChanges},
				op{p.name + " reads it again", p, "cat /data/w /w >/dev/null", noneChanges})
		}
		for i, o := range ops {
			unix.Sync() // no earlier write's writeback may land during this one
			time.Sleep(settle)
			before := marks()
			if o.pod != nil {
				podExec(t, o.pod, i, o.sh)
			}
			time.Sleep(settle)
			after := marks()
			for j, p := range pods {
				changed := before[j] != after[j]
				t.Logf("%-36s %-10s changed %-5v %s", o.name, p.name, changed, delta(before[j], after[j]))
				// The write's bytes are in the io.stat of the cgroup located for the writer only.
				wbytes := after[j].(podcgroup.Snapshot).WriteBytes - before[j].(podcgroup.Snapshot).WriteBytes
				switch {
				case o.want == noneChanges && changed:
					t.Errorf("%s: the mark of %s changed; nothing of it wrote", o.name, p.name)
				case o.want == writerChanges && o.pod == p && (!changed || wbytes < written):
					t.Errorf("%s: its mark changed %v, wbytes +%d; want a change holding the %d bytes", o.name, changed, wbytes, written)
				case o.want == writerChanges && o.pod != p && wbytes >= written:
					t.Errorf("%s: the write's bytes are in the cgroup located for %s (wbytes +%d)", o.name, p.name, wbytes)
				}
			}
		}
		// The layer write landed where the exporter's locator finds the container's layer.
		for _, p := range pods {
			layer, err := fsys.Layers.WritableLayer("containerd://" + p.cid)
			if err != nil {
				t.Errorf("%s: %v", p.name, err)
				continue
			}
			if _, err := os.Stat(filepath.Join(layer, "w")); err != nil {
				t.Errorf("%s: its writable layer write is not in %s: %v", p.name, layer, err)
			}
		}
	})
}

// outcome is what an op must do to the pods' marks.
type outcome int

const (
	// noneChanges: no pod's mark may change.
	noneChanges outcome = iota
	// writerChanges: the writer's mark changes, its io.stat holding the bytes; the others'
	// may move by a metadata page charged to them, never by the write's bytes.
	writerChanges
	// anyChanges: logged only.
	anyChanges
)

// delta says which counters of two snapshots differ, for the log.
func delta(a, b any) string {
	x, ok1 := a.(podcgroup.Snapshot)
	y, ok2 := b.(podcgroup.Snapshot)
	if !ok1 || !ok2 {
		return fmt.Sprintf("%v -> %v", a, b)
	}
	d := func(p, q uint64) string { return strconv.FormatInt(int64(q-p), 10) }
	return "file " + d(x.File, y.File) + " shmem " + d(x.Shmem, y.Shmem) + " dirty " + d(x.Dirty, y.Dirty) +
		" writeback " + d(x.Writeback, y.Writeback) + " wbytes " + d(x.WriteBytes, y.WriteBytes) + " wios " + d(x.WriteIOs, y.WriteIOs)
}

// startNode makes the VM a kubelet's node in layout l, runs containerd and the kubelet, and
// waits for the static pods; everything stops, and the pods' cgroups go, when the test ends.
func startNode(t *testing.T, l layout, pods []*staticPod) {
	t.Helper()
	procs = nil // the daemons of an earlier layout's run are gone
	kubelet := os.Getenv(kubeletEnv)
	if kubelet == "" {
		t.Fatalf("%s names no kubelet (lane.sh copies it in: KERNEL_LANE_PROGRAMS, KERNEL_LANE_ENV)", kubeletEnv)
	}
	// Both layouts run under systemd, as nodes do; the systemd driver cannot run without it.
	if err := checkSystemd(); err != nil {
		t.Fatalf("systemd is not the VM's init (the lane's KERNEL_LANE_INIT=systemd): %v", err)
	}
	devices := strings.Fields(os.Getenv("KERNEL_LANE_SCRATCH_DEVICES"))
	if len(devices) <= l.disk {
		t.Fatalf("the lane gives this test a blank disk per layout for the node's /var/lib (KERNEL_LANE_SCRATCH=%d), got %q", len(layouts), devices)
	}
	device := devices[l.disk]
	run(t, "mkfs.ext4", "-q", "-F", device)
	mkdirs(t, nodeDisk)
	if err := unix.Mount(device, nodeDisk, "ext4", 0, ""); err != nil {
		t.Fatalf("mount %s %s: %v", device, nodeDisk, err)
	}
	t.Cleanup(func() {
		// Containers' root filesystems and the kubelet's mounts below it go first.
		if err := unix.Unmount(nodeDisk, unix.MNT_DETACH); err != nil {
			t.Errorf("umount %s: %v", nodeDisk, err)
		}
		removeState(t)
	})
	mkdirs(t, manifestsDir, "/var/log/pods", "/run/containerd", "/etc/containerd")
	// What a node's root filesystem has and the lane's initramfs lacks: the kubelet copies
	// /etc/hosts into hostNetwork pods.
	writeFile(t, "/etc/hosts", "127.0.0.1 localhost lane\n")
	if l.driver == podcgroup.DriverCgroupfs {
		// As kind's node does: every controller enabled for the root's children, and the cgroup
		// root made before the kubelet starts (it refuses a --cgroup-root that does not exist).
		// Under the systemd driver systemd enables what the kubelet's slices ask for.
		controllers, err := os.ReadFile(filepath.Join(cgroupMount, "cgroup.controllers"))
		if err != nil {
			t.Fatal(err)
		}
		enable := "+" + strings.Join(strings.Fields(string(controllers)), " +")
		writeFile(t, filepath.Join(cgroupMount, "cgroup.subtree_control"), enable)
		mkdirs(t, filepath.Join(cgroupMount, l.root))
	}

	writeFile(t, "/etc/containerd/config.toml", containerdConfig(l.driver == podcgroup.DriverSystemd))
	startProc(t, "containerd", "containerd", "--config", "/etc/containerd/config.toml")
	waitFor(t, "containerd", func() error { _, err := ctr("version"); return err })
	archive := filepath.Join(t.TempDir(), "images.tar")
	if err := cluster.WriteImageArchive(archive); err != nil {
		t.Fatal(err)
	}
	if out, err := ctr("images", "import", archive); err != nil {
		t.Fatalf("ctr images import: %v: %s", err, out)
	}

	for _, p := range pods {
		writeJSON(t, filepath.Join(manifestsDir, p.name+".json"), manifest(p))
	}
	writeJSON(t, "/etc/kubernetes/kubelet.json", kubeletConfig(l))
	// Cleanups run last first: the kubelet stops, then its containers and cgroups go.
	t.Cleanup(func() { stopContainers(t, l) })
	startProc(t, "kubelet", kubelet, "--config=/etc/kubernetes/kubelet.json", "--root-dir=/var/lib/kubelet",
		"--hostname-override=lane", "--v=2")
	for _, p := range pods {
		waitFor(t, "pod "+p.name, func() error { return p.find() })
		t.Logf("pod %s: kubelet UID %s, container %s, pid %d", p.name, p.uid, p.cid, p.pid)
	}
}

// removeState removes what a stopped containerd and kubelet leave outside the node's disk, for
// the next layout's to start clean: containerd's state, with the sandboxes' shm mounts it
// leaves, and the pods' logs.
func removeState(t *testing.T) {
	t.Helper()
	const state = "/run/containerd"
	mounts, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		t.Error(err)
		return
	}
	lines := strings.Split(string(mounts), "\n")
	for _, line := range slices.Backward(lines) { // the deepest, mounted last, first
		if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[1], state+"/") {
			if err := unix.Unmount(f[1], unix.MNT_DETACH); err != nil {
				t.Errorf("umount %s: %v", f[1], err)
			}
		}
	}
	for _, dir := range []string{state, "/var/log/pods"} {
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("removing %s: %v", dir, err)
		}
	}
}

// checkSystemd says whether PID 1 is systemd with the private socket runc's and the kubelet's
// systemd cgroup managers use as root (no D-Bus daemon runs in the VM).
func checkSystemd() error {
	comm, err := os.ReadFile("/proc/1/comm")
	if err != nil {
		return err
	}
	if c := strings.TrimSpace(string(comm)); c != "systemd" {
		return fmt.Errorf("PID 1 is %q", c)
	}
	for _, path := range []string{"/run/systemd/system", "/run/systemd/private"} {
		if _, err := os.Stat(path); err != nil {
			return err
		}
	}
	return nil
}

// find reads the pod's kubelet UID from the kubelet's pods directory (the directory holding a
// container of the pod's name), and its running container from containerd.
func (p *staticPod) find() error {
	dirs, err := os.ReadDir("/var/lib/kubelet/pods")
	if err != nil {
		return err
	}
	p.uid = ""
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join("/var/lib/kubelet/pods", d.Name(), "containers", p.name)); err == nil {
			p.uid = d.Name()
		}
	}
	if p.uid == "" {
		return fmt.Errorf("no directory of the kubelet's has a container %s", p.name)
	}
	out, err := ctr("containers", "ls", "-q", `labels."io.kubernetes.container.name"==`+p.name)
	if err != nil {
		return err
	}
	tasks, err := ctr("tasks", "ls")
	if err != nil {
		return err
	}
	for _, id := range strings.Fields(string(out)) {
		for _, line := range strings.Split(string(tasks), "\n") {
			f := strings.Fields(line)
			if len(f) == 3 && f[0] == id && f[2] == "RUNNING" {
				info, err := ctr("containers", "info", id)
				if err != nil {
					return err
				}
				var c struct{ Labels map[string]string }
				if err := json.Unmarshal(info, &c); err != nil {
					return err
				}
				if uid := c.Labels["io.kubernetes.pod.uid"]; uid != p.uid {
					return fmt.Errorf("container %s of %s is of pod %s, the kubelet's directory says %s", id, p.name, uid, p.uid)
				}
				p.cid = id
				p.pid, err = strconv.Atoi(f[1])
				return err
			}
		}
	}
	return fmt.Errorf("no running container %s yet (%q)", p.name, out)
}

// podExec runs sh -c script in the pod's container, as kubectl exec does (containerd, runc exec).
func podExec(t *testing.T, p *staticPod, i int, script string) {
	t.Helper()
	if out, err := ctr("tasks", "exec", "--exec-id", "lane"+strconv.Itoa(i), p.cid, "sh", "-c", script); err != nil {
		t.Fatalf("exec in %s: %s: %v: %s", p.name, script, err, out)
	}
}

func manifest(p *staticPod) map[string]any {
	c := map[string]any{"name": p.name, "image": cluster.BusyboxImage, "imagePullPolicy": "Never",
		"command":      []string{"sleep", "2147483647"},
		"volumeMounts": []map[string]any{{"name": "data", "mountPath": "/data"}}}
	if p.resources != nil {
		c["resources"] = p.resources
	}
	return map[string]any{"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": p.name, "namespace": "default"},
		"spec": map[string]any{"hostNetwork": true, "terminationGracePeriodSeconds": 0,
			"containers": []any{c}, "volumes": []any{map[string]any{"name": "data", "emptyDir": map[string]any{}}}}}
}

// kubeletConfig: standalone (no --kubeconfig), no server, no network plugin needed (hostNetwork
// pods), no eviction by the VM's own small disk and memory; l's driver and root.
func kubeletConfig(l layout) map[string]any {
	return map[string]any{
		"apiVersion":               "kubelet.config.k8s.io/v1beta1",
		"kind":                     "KubeletConfiguration",
		"cgroupDriver":             string(l.driver),
		"cgroupRoot":               l.root,
		"containerRuntimeEndpoint": "unix:///run/containerd/containerd.sock",
		"staticPodPath":            manifestsDir,
		"fileCheckFrequency":       "2s",
		"enableServer":             false,
		"readOnlyPort":             0,
		"healthzPort":              0,
		"authentication":           map[string]any{"anonymous": map[string]any{"enabled": true}, "webhook": map[string]any{"enabled": false}},
		"authorization":            map[string]any{"mode": "AlwaysAllow"},
		"failSwapOn":               false,
		"makeIPTablesUtilChains":   false,
		"resolvConf":               "",
		"evictionHard": map[string]string{"memory.available": "0%", "nodefs.available": "0%", "nodefs.inodesFree": "0%",
			"imagefs.available": "0%", "imagefs.inodesFree": "0%"},
		"imageGCHighThresholdPercent": 100,
		"imageGCLowThresholdPercent":  99,
	}
}

// containerdConfig is containerd's defaults (root /var/lib/containerd, state /run/containerd:
// source.DefaultFilesystem's) with the lane's sandbox image and runc's cgroups made by systemd
// (SystemdCgroup, as the kubelet's systemd driver needs) or by runc itself.
func containerdConfig(systemdCgroup bool) string {
	return fmt.Sprintf(`version = 2
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  enable_selinux = false
  disable_apparmor = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = %t
`, cluster.SandboxImage, systemdCgroup)
}

func ctr(args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return exec.CommandContext(ctx, "ctr", append([]string{"-n", "k8s.io"}, args...)...).CombinedOutput()
}

// stopContainers kills the kubelet's containers (containerd's CRI plugin deletes their tasks and
// unmounts their root filesystems), then removes the cgroups the kubelet left: deepest first
// under cgroupfs, by stopping their slices under systemd.
func stopContainers(t *testing.T, l layout) {
	if l.driver == podcgroup.DriverSystemd {
		defer stopSlices(t)
	} else {
		defer removeCgroups(t, filepath.Join(cgroupMount, l.root))
	}
	out, err := ctr("tasks", "ls", "-q")
	if err != nil {
		t.Errorf("ctr tasks ls: %v: %s", err, out)
		return
	}
	for _, id := range strings.Fields(string(out)) {
		if out, err := ctr("tasks", "kill", "-s", "KILL", id); err != nil {
			t.Logf("ctr tasks kill %s: %v: %s", id, err, out)
		}
	}
	if err := retry(func() error {
		out, err := ctr("tasks", "ls", "-q")
		if err == nil && len(bytes.TrimSpace(out)) > 0 {
			err = fmt.Errorf("tasks left: %s", bytes.Fields(out))
		}
		return err
	}); err != nil {
		t.Errorf("stopping the containers: %v", err)
	}
}

// stopSlices stops kubepods.slice, and with it every slice the kubelet made below it.
func stopSlices(t *testing.T) {
	if out, err := exec.Command("systemctl", "stop", "kubepods.slice").CombinedOutput(); err != nil {
		t.Errorf("systemctl stop kubepods.slice: %v: %s", err, out)
		return
	}
	if err := retry(func() error {
		_, err := os.Stat(filepath.Join(cgroupMount, "kubepods.slice"))
		if err == nil {
			return errors.New("kubepods.slice is still there")
		}
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}); err != nil {
		t.Errorf("stopping the kubelet's slices: %v", err)
	}
}

func removeCgroups(t *testing.T, dir string) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return // removed by runc meanwhile
	}
	if err != nil {
		t.Errorf("removing the kubelet's cgroups: %v", err)
		return
	}
	for _, e := range entries {
		if e.IsDir() {
			removeCgroups(t, filepath.Join(dir, e.Name()))
		}
	}
	if err := retry(func() error {
		if err := unix.Rmdir(dir); !errors.Is(err, unix.ENOENT) {
			return err
		}
		return nil
	}); err != nil {
		t.Errorf("rmdir %s: %v", dir, err)
	}
}

// startProc starts a daemon with its output in a log file; it is stopped (SIGTERM, then
// SIGKILL) when the test ends, its log's tail printed if the test failed.
func startProc(t *testing.T, name, bin string, args ...string) {
	t.Helper()
	logPath := filepath.Join(os.TempDir(), name+".log")
	log, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	procs = append(procs, daemon{name, logPath, done})
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		var err error
		select {
		case err = <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			err = <-done
		}
		t.Logf("%s stopped: %v", name, err)
		log.Close()
		if t.Failed() {
			t.Logf("%s's log ends:\n%s", name, tail(logPath, 60))
		}
	})
}

type daemon struct {
	name, log string
	done      chan error
}

// procs are the daemons started, watched while waiting: one that exits fails the wait.
var procs []daemon

// waitFor polls f until it returns nil; it fails the test when a daemon exits or waitLimit
// passes.
func waitFor(t *testing.T, what string, f func() error) {
	t.Helper()
	t0 := time.Now()
	deadline := t0.Add(waitLimit)
	for {
		err := f()
		if err == nil {
			t.Logf("%s ready after %s", what, time.Since(t0).Round(100*time.Millisecond))
			return
		}
		for _, d := range procs {
			select {
			case derr := <-d.done:
				d.done <- derr
				t.Fatalf("waiting for %s: %s exited: %v; its log ends:\n%s", what, d.name, derr, tail(d.log, 60))
			default:
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready after %s: %v", what, waitLimit, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func retry(f func() error) error {
	var err error
	for range 120 {
		if err = f(); err == nil {
			return nil
		}
		time.Sleep(500 * time.Millisecond)
	}
	return err
}

func tail(path string, lines int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	l := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	return string(bytes.Join(l[max(0, len(l)-lines):], []byte("\n")))
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v: %s", name, args, err, out)
	}
}

func mkdirs(t *testing.T, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			t.Fatal(err)
		}
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, string(b))
}
