package change_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/emptydir-guard/emptydir-guard/exporter/change"
	"github.com/emptydir-guard/emptydir-guard/exporter/source"
	"github.com/emptydir-guard/emptydir-guard/exporter/volume"
	"github.com/emptydir-guard/emptydir-guard/internal/podcgroup"
)

// openNodeCgroups opens this machine's cgroups as the exporter's signal does, for a kubelet
// root dir, a snapshotter root and a CRI containers directory in dir.
func openNodeCgroups(t *testing.T, dir string) *change.Cgroup {
	t.Helper()
	fs := source.DefaultFilesystem()
	fs.KubeletRootDir = filepath.Join(dir, "kubelet")
	fs.Layers.SnapshotterRoot = filepath.Join(dir, "snapshots")
	fs.Layers.CRIContainersDir = filepath.Join(dir, "containers")
	for _, d := range []string{filepath.Join(fs.KubeletRootDir, "pods"), fs.Layers.SnapshotterRoot, fs.Layers.CRIContainersDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s, err := change.NewCgroup(podcgroup.DefaultConfig(), &fs)
	if err != nil {
		t.Skipf("this machine's cgroups cannot be read: %v", err)
	}
	return s
}

// TestCgroupSignalMarkReasons: a pod the kubelet made no cgroup for has no mark, with
// podcgroup's reason as the outcome label; a QoS class no kubelet names is invalid.
func TestCgroupSignalMarkReasons(t *testing.T) {
	s := openNodeCgroups(t, t.TempDir())
	for _, tc := range []struct {
		pod    volume.PodVolumes
		reason string
	}{
		{volume.PodVolumes{UID: "0e3c0a58-6f8d-4a4e-9a57-2b7c1a3e9f00", QOSClass: "BestEffort"}, podcgroup.ReasonNotFound},
		{volume.PodVolumes{UID: "0e3c0a58-6f8d-4a4e-9a57-2b7c1a3e9f00", QOSClass: "Platinum"}, podcgroup.ReasonInvalid},
		{volume.PodVolumes{UID: "../../..", QOSClass: "Guaranteed"}, podcgroup.ReasonInvalid},
		// A static pod is found by its config hash, which no cgroup has here either.
		{volume.PodVolumes{UID: "mirror", ConfigHash: "0123456789abcdef0123456789abcdef", QOSClass: "Burstable"}, podcgroup.ReasonNotFound},
	} {
		m, err := s.Mark(tc.pod)
		se := (*change.Error)(nil)
		if !errors.As(err, &se) || se.Reason != tc.reason || m != (change.Mark{}) {
			t.Errorf("Mark(%+v) = %v, %v; want no mark, reason %s", tc.pod, m, err, tc.reason)
		}
	}
}

// TestCgroupSignalVouches: equal marks never spare a configMap's walk (the kubelet writes it,
// outside the pod's cgroup), and spare the rest only as the cgroup version and the
// filesystems allow: under v1 every page a pod charges counts (total_pgpgin); under v2 a
// tmpfs's pages only in gauges.
func TestCgroupSignalVouches(t *testing.T) {
	dir := t.TempDir()
	s := openNodeCgroups(t, dir)
	medium, err := podcgroup.MediumOf(dir)
	if err != nil {
		t.Fatal(err)
	}
	disk := s.Version() == podcgroup.V1 || medium == podcgroup.Disk
	if s.Version() == podcgroup.V2 && medium == podcgroup.Disk {
		if disk, err = podcgroup.WritebackCharged(dir); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		v    volume.Volume
		want bool
	}{
		{volume.Volume{Name: "cache", Kind: volume.KindEmptyDir, Medium: volume.MediumDisk}, disk},
		{volume.Volume{Name: "shm", Kind: volume.KindEmptyDir, Medium: volume.MediumMemory}, s.Version() == podcgroup.V1},
		{volume.Volume{Kind: volume.KindWritableLayer, Container: "app"}, disk},
		{volume.Volume{Name: "config", Kind: volume.KindConfigMap}, false},
		{volume.Volume{Name: "repo", Kind: volume.KindGitRepo}, false},
	} {
		if got := s.Vouches(tc.v); got != tc.want {
			t.Errorf("Vouches(%+v) = %v, want %v (cgroup v%d, test directory on %v)", tc.v, got, tc.want, s.Version(), medium)
		}
	}
}

// TestCgroupSignalUnavailable: a mount that is no cgroup filesystem gives no signal; the
// stand-in the command then uses gives every pod the reason unavailable and vouches for nothing.
func TestCgroupSignalUnavailable(t *testing.T) {
	fs := source.DefaultFilesystem()
	fs.KubeletRootDir = t.TempDir()
	cfg := podcgroup.DefaultConfig()
	cfg.Mount = t.TempDir()
	_, err := change.NewCgroup(cfg, &fs)
	if err == nil {
		t.Fatalf("NewCgroup(%s) passed, want an error: it is no cgroup filesystem", cfg.Mount)
	}
	u := change.Unavailable{Err: err}
	se := (*change.Error)(nil)
	if _, err := u.Mark(volume.PodVolumes{UID: "u"}); !errors.As(err, &se) || se.Reason != change.MarkUnavailable {
		t.Errorf("Unavailable.Mark: %v, want reason %s", err, change.MarkUnavailable)
	}
	if u.Vouches(volume.Volume{Kind: volume.KindEmptyDir, Medium: volume.MediumDisk}) {
		t.Error("Unavailable vouches for a disk emptyDir")
	}
}
