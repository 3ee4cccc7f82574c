package change_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/emptydir-guard/emptydir-guard/exporter/change"
	"github.com/emptydir-guard/emptydir-guard/exporter/part"
	"github.com/emptydir-guard/emptydir-guard/internal/podcgroup"
)

// openNodeCgroups opens this machine's cgroups as the exporter's signal does, for a kubelet
// root dir, a snapshotter root and a CRI containers directory in dir.
func openNodeCgroups(t *testing.T, dir string) *change.Cgroup {
	t.Helper()
	dirs := change.Dirs{
		Pods:         filepath.Join(dir, "kubelet", "pods"),
		Layers:       filepath.Join(dir, "snapshots"),
		ImageVolumes: filepath.Join(dir, "containers"),
	}
	for _, d := range []string{dirs.Pods, dirs.Layers, dirs.ImageVolumes} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s, err := change.NewCgroup(podcgroup.DefaultConfig(), dirs)
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
		pod    part.Pod
		reason string
	}{
		{part.Pod{UID: "0e3c0a58-6f8d-4a4e-9a57-2b7c1a3e9f00", QOSClass: "BestEffort"}, podcgroup.ReasonNotFound},
		{part.Pod{UID: "0e3c0a58-6f8d-4a4e-9a57-2b7c1a3e9f00", QOSClass: "Platinum"}, podcgroup.ReasonInvalid},
		{part.Pod{UID: "../../..", QOSClass: "Guaranteed"}, podcgroup.ReasonInvalid},
		// A static pod is found by its config hash, which no cgroup has here either.
		{part.Pod{UID: "mirror", ConfigHash: "0123456789abcdef0123456789abcdef", QOSClass: "Burstable"}, podcgroup.ReasonNotFound},
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
		v    part.Part
		want bool
	}{
		{part.Part{Name: "cache", Kind: part.KindEmptyDir, Medium: part.MediumDisk}, disk},
		{part.Part{Name: "shm", Kind: part.KindEmptyDir, Medium: part.MediumMemory}, s.Version() == podcgroup.V1},
		{part.Part{Kind: part.KindWritableLayer, Container: "app"}, disk},
		{part.Part{Name: "config", Kind: part.KindConfigMap}, false},
		{part.Part{Name: "repo", Kind: part.KindGitRepo}, false},
	} {
		if got := s.Vouches(tc.v); got != tc.want {
			t.Errorf("Vouches(%+v) = %v, want %v (cgroup v%d, test directory on %v)", tc.v, got, tc.want, s.Version(), medium)
		}
	}
}

// TestCgroupSignalUnavailable: a mount that is no cgroup filesystem gives no signal; the
// stand-in the command then uses gives every pod the reason unavailable and vouches for nothing.
func TestCgroupSignalUnavailable(t *testing.T) {
	cfg := podcgroup.DefaultConfig()
	cfg.Mount = t.TempDir()
	_, err := change.NewCgroup(cfg, change.Dirs{Pods: t.TempDir()})
	if err == nil {
		t.Fatalf("NewCgroup(%s) passed, want an error: it is no cgroup filesystem", cfg.Mount)
	}
	u := change.Unavailable{Err: err}
	se := (*change.Error)(nil)
	if _, err := u.Mark(part.Pod{UID: "u"}); !errors.As(err, &se) || se.Reason != change.MarkUnavailable {
		t.Errorf("Unavailable.Mark: %v, want reason %s", err, change.MarkUnavailable)
	}
	if u.Vouches(part.Part{Kind: part.KindEmptyDir, Medium: part.MediumDisk}) {
		t.Error("Unavailable vouches for a disk emptyDir")
	}
}
