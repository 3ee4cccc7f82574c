package podcgroup

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// makeCgroups makes the cgroup directories of rel below base, one level at a time, and removes
// them, deepest first, when the test ends.
func makeCgroups(t *testing.T, base, rel string) string {
	t.Helper()
	dir := base
	for _, c := range splitPath(rel) {
		dir = filepath.Join(dir, c)
		if _, err := os.Stat(dir); err == nil {
			continue
		}
		makeCgroup(t, dir)
	}
	return dir
}

func splitPath(rel string) []string {
	var parts []string
	for rel != "" && rel != "." && rel != "/" {
		dir, file := filepath.Split(filepath.Clean(rel))
		parts = append([]string{file}, parts...)
		rel = dir
	}
	return parts
}

// TestLocateRealV1Tree: in the host's real v1 memory hierarchy, Open detects v1 and Locate
// finds a cgroupfs and a systemd pod below a --cgroup-root of the test's, with auto.
func TestLocateRealV1Tree(t *testing.T) {
	requireV1(t)
	root := "/podcgroup-test-" + strconv.Itoa(os.Getpid())
	cfg := DefaultConfig()
	cfg.Root = root
	l, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	base := "/sys/fs/cgroup/memory"
	const burstable, guaranteed = "11111111-2222-3333-4444-555555555555", "66666666-7777-8888-9999-000000000000"
	fsDir := makeCgroups(t, base, root+"/kubepods/burstable/pod"+burstable)
	sdDir := makeCgroups(t, base, "podcgroup_test_"+strconv.Itoa(os.Getpid())+".slice/podcgroup_test_"+strconv.Itoa(os.Getpid())+
		"-kubepods.slice/podcgroup_test_"+strconv.Itoa(os.Getpid())+"-kubepods-pod"+
		"66666666_7777_8888_9999_000000000000.slice")
	for _, tc := range []struct{ uid, qos, dir string }{{burstable, QOSBurstable, fsDir}, {guaranteed, QOSGuaranteed, sdDir}} {
		p, err := l.Locate(tc.uid, tc.qos)
		if err != nil || p.Dir != tc.dir || p.Version != V1 {
			t.Fatalf("pod %s: %+v, %v; want %s", tc.uid, p, err, tc.dir)
		}
		s, err := p.Read()
		if err != nil || s.Cgroup == 0 || s.PgpgIn != 0 {
			t.Errorf("pod %s, no process ever in it: %+v, %v", tc.uid, s, err)
		}
	}
	wantReason(t, l, burstable, QOSBestEffort, ReasonNotFound)
}

// TestSignalV1CgroupLifecycle: a container's cgroup removed (a restart) takes nothing from its
// pod's total_pgpgin, and a pod cgroup made again never compares equal to its predecessor,
// although every counter of both reads zero.
func TestSignalV1CgroupLifecycle(t *testing.T) {
	requireV1(t)
	podDir, _ := testCgroups(t, "podcgroup-life-"+strconv.Itoa(os.Getpid()))
	pod := Pod{Dir: podDir, Version: V1}
	ctr := filepath.Join(podDir, "ctr")
	makeCgroup(t, ctr)
	w := startWriter(t)
	w.do(t, "freeze")
	w.join(t, ctr)
	w.do(t, "syncwrite", filepath.Join(t.TempDir(), "f"), "1048576")
	time.Sleep(settle)
	written, err := pod.Read()
	if err != nil {
		t.Fatal(err)
	}
	if written.PgpgIn == 0 {
		t.Fatalf("the container's write is not in its pod's total_pgpgin: %+v", written)
	}
	w.stop()
	removeCgroup(t, ctr)
	time.Sleep(settle)
	gone, err := pod.Read()
	if err != nil {
		t.Fatal(err)
	}
	if gone.PgpgIn < written.PgpgIn {
		t.Errorf("the container's cgroup removed, total_pgpgin fell from %d to %d: a later write could bring it back to an old mark",
			written.PgpgIn, gone.PgpgIn)
	}
	t.Logf("total_pgpgin with the container: %d, after its cgroup was removed: %d", written.PgpgIn, gone.PgpgIn)

	fresh := filepath.Join(podDir, "again")
	makeCgroup(t, fresh)
	first, err := Pod{Dir: fresh, Version: V1}.Read()
	if err != nil {
		t.Fatal(err)
	}
	removeCgroup(t, fresh)
	makeCgroup(t, fresh)
	second, err := Pod{Dir: fresh, Version: V1}.Read()
	if err != nil {
		t.Fatal(err)
	}
	if first == second || first.PgpgIn != second.PgpgIn {
		t.Errorf("a cgroup made again: %+v, then %+v; want only the inode to differ", first, second)
	}
}
