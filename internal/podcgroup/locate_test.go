package podcgroup

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

const (
	v1Stat = "cache 0\nrss 0\ndirty 0\nwriteback 0\npgpgin 3\ntotal_cache 8192\ntotal_dirty 4096\ntotal_writeback 0\ntotal_pgpgin 42\ntotal_pgpgout 40\n"
	v2Stat = "anon 0\nfile 12288\nshmem 4096\nfile_dirty 8192\nfile_writeback 0\npgfault 9\n"
	v2IO   = "254:0 rbytes=1 wbytes=4096 rios=1 wios=1 dbytes=0 dios=0\n7:0 rbytes=0 wbytes=8192 rios=0 wios=2 dbytes=0 dios=0\n"
)

// fakeTree makes the pod's cgroup directory at rel below base with the given counter files.
func fakeTree(t *testing.T, base, rel string, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(base, filepath.FromSlash(rel))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestLocateFakeTrees: the four layouts (cgroupfs and systemd, v1 and v2) are found with the
// driver named and with auto, and read as their version's counters.
func TestLocateFakeTrees(t *testing.T) {
	const uid = "0f1e2d3c-aaaa-bbbb-cccc-000000000001"
	for _, tc := range []struct {
		version Version
		driver  Driver
		rel     string
		files   map[string]string
		want    Snapshot
	}{
		{V1, DriverCgroupfs, "kubepods/burstable/pod" + uid, map[string]string{"memory.stat": v1Stat},
			Snapshot{Version: V1, PgpgIn: 42, Dirty: 4096}},
		{V1, DriverSystemd, "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0f1e2d3c_aaaa_bbbb_cccc_000000000001.slice",
			map[string]string{"memory.stat": v1Stat}, Snapshot{Version: V1, PgpgIn: 42, Dirty: 4096}},
		{V2, DriverCgroupfs, "kubepods/burstable/pod" + uid, map[string]string{"memory.stat": v2Stat, "io.stat": v2IO},
			Snapshot{Version: V2, File: 12288, Shmem: 4096, Dirty: 8192, WriteBytes: 12288, WriteIOs: 3}},
		{V2, DriverSystemd, "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0f1e2d3c_aaaa_bbbb_cccc_000000000001.slice",
			map[string]string{"memory.stat": v2Stat, "io.stat": v2IO},
			Snapshot{Version: V2, File: 12288, Shmem: 4096, Dirty: 8192, WriteBytes: 12288, WriteIOs: 3}},
	} {
		base := t.TempDir()
		dir := fakeTree(t, base, tc.rel, tc.files)
		id, err := dirID(dir)
		if err != nil {
			t.Skip(err) // no inode numbers on this OS
		}
		tc.want.Cgroup = id
		for _, driver := range []Driver{tc.driver, DriverAuto} {
			l, err := newLocator(Config{Root: "/", Driver: driver}, tc.version, base)
			if err != nil {
				t.Fatal(err)
			}
			p, err := l.Locate(uid, QOSBurstable)
			if err != nil {
				t.Fatalf("v%d %s as %s: %v", tc.version, tc.driver, driver, err)
			}
			if p.Dir != dir || p.Driver != tc.driver {
				t.Errorf("v%d %s as %s: found %s (%s), want %s", tc.version, tc.driver, driver, p.Dir, p.Driver, dir)
			}
			got, err := l.Mark(uid, QOSBurstable)
			if err != nil || got != tc.want {
				t.Errorf("v%d %s: snapshot %+v, %v; want %+v", tc.version, tc.driver, got, err, tc.want)
			}
		}
		// The other driver named, or another QoS class, finds nothing.
		other := map[Driver]Driver{DriverCgroupfs: DriverSystemd, DriverSystemd: DriverCgroupfs}[tc.driver]
		l, _ := newLocator(Config{Root: "/", Driver: other}, tc.version, base)
		wantReason(t, l, uid, QOSBurstable, ReasonNotFound)
		l, _ = newLocator(Config{Root: "/", Driver: tc.driver}, tc.version, base)
		wantReason(t, l, uid, QOSGuaranteed, ReasonNotFound)
		wantReason(t, l, "../"+uid, QOSBurstable, ReasonInvalid)
	}
}

func wantReason(t *testing.T, l *Locator, uid, qos, reason string) {
	t.Helper()
	_, err := l.Mark(uid, qos)
	var e *Error
	if !errors.As(err, &e) || e.Reason != reason {
		t.Errorf("pod %s (%s): %v, want reason %s", uid, qos, err, reason)
	}
}

// TestLocateAmbiguousAndUnsound: a pod in both layouts is no guess; a v2 cgroup without io.stat
// (no io controller) gives no snapshot; unparsable counters are unreadable.
func TestLocateAmbiguousAndUnsound(t *testing.T) {
	const uid = "u1"
	base := t.TempDir()
	fakeTree(t, base, "kubepods/pod"+uid, map[string]string{"memory.stat": v2Stat})
	fakeTree(t, base, "kubepods.slice/kubepods-pod"+uid+".slice", map[string]string{"memory.stat": v2Stat})
	l, err := newLocator(Config{Root: "/", Driver: DriverAuto}, V2, base)
	if err != nil {
		t.Fatal(err)
	}
	wantReason(t, l, uid, QOSGuaranteed, ReasonAmbiguous)
	l, _ = newLocator(Config{Root: "/", Driver: DriverCgroupfs}, V2, base)
	wantReason(t, l, uid, QOSGuaranteed, ReasonUnsound)

	fakeTree(t, base, "kubepods/besteffort/pod"+uid, map[string]string{"memory.stat": "total_pgpgin x\n"})
	l, _ = newLocator(Config{Root: "/", Driver: DriverCgroupfs}, V1, base)
	wantReason(t, l, uid, QOSBestEffort, ReasonUnreadable)
	fakeTree(t, base, "kubepods/burstable/pod"+uid, map[string]string{"memory.stat": "total_pgpgin 1\n"})
	wantReason(t, l, uid, QOSBurstable, ReasonUnreadable) // no total_dirty

	if _, err := newLocator(Config{Root: "/", Driver: "docker"}, V1, base); err == nil {
		t.Error(`driver "docker" accepted`)
	}
}

// TestRetarget: a Locator moved to another root finds pods there and no longer at the old one;
// a root the kubelet would refuse is an error that keeps the root in use.
func TestRetarget(t *testing.T) {
	const uid = "0f1e2d3c-aaaa-bbbb-cccc-000000000002"
	base := t.TempDir()
	fakeTree(t, base, "kubepods/burstable/pod"+uid, map[string]string{"memory.stat": v1Stat})
	moved := fakeTree(t, base, "kubelet/kubepods/burstable/pod"+uid, map[string]string{"memory.stat": v1Stat})
	l, err := newLocator(Config{Root: "/", Driver: DriverCgroupfs}, V1, base)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Retarget("/kubelet"); err != nil {
		t.Fatal(err)
	}
	if p, err := l.Locate(uid, QOSBurstable); err != nil || p.Dir != moved || l.Root() != "/kubelet" {
		t.Errorf("after Retarget(/kubelet): %+v, %v, root %s; want %s", p, err, l.Root(), moved)
	}
	if err := l.Retarget("/kube_let"); err == nil || l.Root() != "/kubelet" {
		t.Errorf("Retarget(/kube_let): %v, root %s; want an error and the root /kubelet kept", err, l.Root())
	}
	if err := l.Retarget("/elsewhere"); err != nil {
		t.Fatal(err)
	}
	wantReason(t, l, uid, QOSBurstable, ReasonNotFound)
	if err := l.Retarget("/"); err != nil || l.Root() != "/" {
		t.Fatalf("Retarget(/): %v, root %s", err, l.Root())
	}
	if p, err := l.Locate(uid, QOSBurstable); err != nil || p.Dir == moved {
		t.Errorf("back at /: %+v, %v; want the pod below the root /", p, err)
	}
}
