package podcgroup

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/emptydir-guard/emptydir-guard/internal/fswalk/fswalktest"
)

// laneCgroup2Env is set to 1 by the kernel lane's cgroup v2 boot (KERNEL_LANE_CGROUP2=1 of
// test/kernellane/lane.sh): there a v2 test that cannot run fails instead of skipping.
const laneCgroup2Env = "KERNEL_LANE_CGROUP2"

// v2Mount is where the kubelet's host (and the lane's /init) mounts cgroup2.
const v2Mount = "/sys/fs/cgroup"

// requireV2 skips t unless this machine's cgroups are v2 and the test runs as root; in the
// kernel lane's v2 boot it fails instead.
func requireV2(t *testing.T) {
	t.Helper()
	inLane := os.Getenv(laneCgroup2Env) == "1"
	if inLane && os.Geteuid() != 0 {
		t.Fatal("the kernel lane runs its tests as root")
	}
	fswalktest.RequireRoot(t, "making cgroups")
	l, err := Open(DefaultConfig())
	switch {
	case err == nil && l.Version() == V2:
		return
	case inLane:
		t.Fatalf("%s=1, but %s is no cgroup v2 hierarchy: %v, %v", laneCgroup2Env, v2Mount, l, err)
	case err != nil:
		t.Skipf("no cgroups at %s: %v", v2Mount, err)
	default:
		t.Skipf("the host's cgroups are v%d; this test makes v2 cgroups (the kernel lane boots a v2 VM for it)", l.Version())
	}
}

// makeV2Cgroups makes the cgroup directories of rel below the v2 mount, one level at a time, each
// parent with controllers (as "+memory +io") enabled for its children, so that the deepest
// directory gets memory.stat and, with io, io.stat. The root must have them enabled already (the
// lane's /init does, as the kubelet's host does): the test does not change the root.
// Everything is removed, deepest first, when the test ends.
func makeV2Cgroups(t *testing.T, rel, controllers string) string {
	t.Helper()
	root, err := os.ReadFile(filepath.Join(v2Mount, "cgroup.subtree_control"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range strings.Fields(controllers) {
		if !strings.Contains(" "+strings.TrimSpace(string(root))+" ", " "+strings.TrimPrefix(c, "+")+" ") {
			t.Fatalf("the root cgroup does not enable %s for its children (cgroup.subtree_control %q)", c, root)
		}
	}
	dir := v2Mount
	parts := splitPath(rel)
	for i, c := range parts {
		dir = filepath.Join(dir, c)
		if _, err := os.Stat(dir); err != nil {
			makeCgroup(t, dir)
		}
		if i < len(parts)-1 {
			enableControllers(t, dir, controllers)
		}
	}
	return dir
}

func enableControllers(t *testing.T, dir, controllers string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte(controllers), 0); err != nil {
		t.Fatalf("enabling %s in %s: %v", controllers, dir, err)
	}
}

// v2Pod makes a pod-like cgroup of its own (memory and io enabled in it) for one test.
func v2Pod(t *testing.T, name string) Pod {
	t.Helper()
	dir := makeV2Cgroups(t, "podcgroup-"+name+"-"+strconv.Itoa(os.Getpid())+"/pod", "+memory +io")
	return Pod{Dir: dir, Version: V2}
}

// diskFS makes a filesystem of type fs ("ext4", "xfs", or "ext4" with extra mount options)
// and mounts it for the test. In the kernel lane it is made on a blank virtio disk of its own
// (KERNEL_LANE_SCRATCH_DEVICES: the first for ext4, the second for XFS): a loop device over a
// file on the VM's tmpfs would charge the loop file's tmpfs pages to the writer's cgroup
// (drivers/block/loop.c hands the bio's memory cgroup to its worker), which no real disk does.
// Elsewhere it is a loop device (fswalktest).
func diskFS(t *testing.T, fs, options string) string {
	t.Helper()
	mkfs := map[string][]string{"ext4": {"mkfs.ext4", "-q", "-F"}, "xfs": {"mkfs.xfs", "-q", "-f"}}[fs]
	devices := strings.Fields(os.Getenv("KERNEL_LANE_SCRATCH_DEVICES"))
	i := map[string]int{"ext4": 0, "xfs": 1}[fs]
	if i >= len(devices) {
		if os.Getenv(laneCgroup2Env) == "1" {
			t.Fatalf("the kernel lane's v2 boot gives the tests blank disks (KERNEL_LANE_SCRATCH=2): got %q", devices)
		}
		mnt, err := fswalktest.LoopFS{Type: fs, MKFS: mkfs, Options: options}.Mount(t, 1<<30)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s on a loop device at %s (its backing file's page cache may count to the writer's cgroup)", fs, mnt)
		return mnt
	}
	dev := devices[i]
	if out, err := exec.Command(mkfs[0], append(mkfs[1:], dev)...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v: %s", mkfs[0], dev, err, out)
	}
	mnt := t.TempDir()
	if err := unix.Mount(dev, mnt, fs, 0, options); err != nil {
		t.Fatalf("mount -t %s -o %q %s %s: %v", fs, options, dev, mnt, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(mnt, 0); err != nil {
			t.Errorf("umount %s: %v", mnt, err)
		}
	})
	return mnt
}

// v2Gauges are memory.stat figures of a pod cgroup that the Snapshot leaves out, logged to
// tell a write's pages from the writer's own memory.
func v2Anon(t *testing.T, dir string) int64 {
	t.Helper()
	return int64(readFields(t, filepath.Join(dir, "memory.stat"), "anon")[0])
}

func readPod(t *testing.T, p Pod) Snapshot {
	t.Helper()
	s, err := p.Read()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// delta is after - before of every Snapshot counter, for the log.
func delta(before, after Snapshot) string {
	d := func(a, b uint64) int64 { return int64(a - b) }
	return "file " + strconv.FormatInt(d(after.File, before.File), 10) +
		"  shmem " + strconv.FormatInt(d(after.Shmem, before.Shmem), 10) +
		"  dirty " + strconv.FormatInt(d(after.Dirty, before.Dirty), 10) +
		"  writeback " + strconv.FormatInt(d(after.Writeback, before.Writeback), 10) +
		"  wbytes " + strconv.FormatInt(d(after.WriteBytes, before.WriteBytes), 10) +
		"  wios " + strconv.FormatInt(d(after.WriteIOs, before.WriteIOs), 10)
}

type v2Case struct {
	name   string
	setup  [][]string
	op     []string
	target string // what a walk would measure
	want   expect
	grows  bool
	// wbytes is the least io.stat wbytes must grow by: the write reached the disk under the
	// pod's cgroup (fsync, O_DIRECT).
	wbytes uint64
}

// runV2Cases has the writer, in pod's cgroup, run each case, with every earlier write on
// disk and the memory controller's counters flushed before and after it, and checks the
// snapshot as the kernel's code says v2 counts it. fs is the filesystem written, the only
// one synced: other subtests write other filesystems meanwhile (docs/change-signal.md). Unlike v1's, the
// v2 snapshot holds no counter of anonymous memory, so the writer's own heap cannot pass for
// a write: "unseen" is asserted as snapshots equal.
func runV2Cases(t *testing.T, pod Pod, w *writer, fs string, cases []v2Case) {
	t.Helper()
	for _, op := range cases {
		for _, s := range op.setup {
			w.do(t, s[0], s[1:]...)
		}
		fswalktest.SyncFS(t, fs) // no earlier write's writeback may land during this one
		time.Sleep(settle)
		before, used, anon := readPod(t, pod), allocated(t, op.target), v2Anon(t, pod.Dir)
		w.do(t, op.op[0], op.op[1:]...)
		time.Sleep(settle)
		after := readPod(t, pod)
		grew, changed := allocated(t, op.target)-used, after != before
		t.Logf("%-42s grew %8d B  %s  changed %-5v (anon %+d B)", op.name, grew, delta(before, after), changed, v2Anon(t, pod.Dir)-anon)
		if op.grows != (grew > 0) {
			t.Errorf("%s: grew %d bytes, want growth %v", op.name, grew, op.grows)
		}
		switch {
		case op.want == seen && !changed:
			t.Errorf("%s: snapshot unchanged (%+v), want it changed", op.name, after)
		case op.want == unseen && changed:
			t.Errorf("%s: snapshot changed: %s; want it equal", op.name, delta(before, after))
		}
		got := after.WriteBytes - before.WriteBytes
		if got < op.wbytes {
			t.Errorf("%s: io.stat wbytes grew by %d, want at least %d", op.name, got, op.wbytes)
		}
		// Only the pod's own bios count in its io.stat (the journal and metadata writeback run
		// outside it): a write that is not seen as data must not be there either.
		if op.want != seen && got != 0 {
			t.Errorf("%s: io.stat wbytes grew by %d, want 0", op.name, got)
		}
	}
}

// TestSignalV2Writes runs a writer in a v2 pod cgroup of its own (memory and io controllers
// enabled down to it), has it write in each way a tenant can, on ext4 and XFS on a block
// device and on tmpfs, and checks which writes change the snapshot and which grow files
// without changing it (the holes the caller bounds).
func TestSignalV2Writes(t *testing.T) {
	requireV2(t)
	// The filesystems run side by side (make test-kernel-lane gives -test.parallel 3: the VM
	// has one CPU), each with a pod cgroup, a writer and a disk of its own and syncing only
	// its own filesystem: the lane's time goes to the settles, not to its CPU. The node's
	// writeback is scaled down for all of them (rotateV2), once.
	scaleWriteback(t)
	t.Run("writes", func(t *testing.T) {
		for _, fs := range []string{"ext4", "xfs"} {
			t.Run(fs, func(t *testing.T) {
				t.Parallel()
				v2DiskWrites(t, fs)
			})
		}
		t.Run("tmpfs", func(t *testing.T) {
			t.Parallel()
			v2TmpfsWrites(t)
		})
	})
}

// v2DiskWrites runs the writes table on a disk filesystem fs and the writes it sees only at
// their writeback (balancedV2, rotateV2).
func v2DiskWrites(t *testing.T, fs string) {
	const mib, mibN = "1048576", 1 << 20
	disk := diskFS(t, fs, "")
	pod := v2Pod(t, "writes-"+fs)
	w := startWriter(t)
	w.join(t, pod.Dir)
	d := func(name string) string { return filepath.Join(disk, name) }
	runV2Cases(t, pod, w, disk, []v2Case{
		{"nothing (control)", nil, []string{"noop"}, disk, unseen, false, 0},
		{"disk: new file, 1 MiB, buffered", nil, []string{"write", d("new"), mib}, d("new"), seen, true, 0},
		{"disk: new file, 1 MiB, fsync", nil, []string{"syncwrite", d("synced"), mib}, d("synced"), seen, true, mibN},
		{"disk: append 64 KiB, fsync", [][]string{{"syncwrite", d("log"), "65536"}}, []string{"append", d("log"), "65536"}, d("log"), seen, true, 65536},
		// Nothing grows, yet the page written back is the pod's I/O: an extra walk.
		{"disk: overwrite 64 KiB in place, fsync", [][]string{{"syncwrite", d("db"), "65536"}}, []string{"overwrite", d("db"), "65536"}, d("db"), seen, false, 65536},
		{"disk: fill 1 MiB of cached hole, fsync", [][]string{{"sparse", d("sparse"), mib}}, []string{"overwrite", d("sparse"), mib}, d("sparse"), seen, true, mibN},
		// No data page, no write: a hole, but for a metadata page (the extent tree's, the
		// bitmap's) the fallocate may read into the page cache first, as ext4's did here.
		{"disk: fallocate 1 MiB", nil, []string{"fallocate", d("falloc"), mib}, d("falloc"), either, true, 0},
		{"disk: new file, 1 MiB, O_DIRECT", nil, []string{"direct", d("direct"), mib}, d("direct"), seen, true, mibN},
		{"disk: 2000 empty files", nil, []string{"touch", d("files"), "2000"}, d("files"), either, true, 0},
		{"disk: 200 empty directories", nil, []string{"mkdir", d("directories"), "200"}, d("directories"), either, true, 0},
		{"disk: 3000-byte xattr", nil, []string{"xattr", d("xattr"), "3000"}, d("xattr"), either, true, 0},
		{"nothing (control, again)", nil, []string{"noop"}, disk, unseen, false, 0},
	})
	balancedV2(t, pod, w, disk)
	rotateV2(t, pod, w, disk)
}

// v2TmpfsWrites runs the writes table on two tmpfs, as two memory volumes of a pod.
func v2TmpfsWrites(t *testing.T) {
	const mib = "1048576"
	tmpA, tmpB := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	for _, d := range []string{tmpA, tmpB} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		fswalktest.MountTmpfs(t, d, "size=16m")
	}
	pod := v2Pod(t, "writes-tmpfs")
	w := startWriter(t)
	w.join(t, pod.Dir)
	a, b := func(n string) string { return filepath.Join(tmpA, n) }, func(n string) string { return filepath.Join(tmpB, n) }
	cases := []v2Case{
		{"tmpfs: new file, 1 MiB", nil, []string{"write", a("new"), mib}, tmpA, seen, true, 0},
		{"tmpfs: fallocate 1 MiB", nil, []string{"fallocate", a("falloc"), mib}, tmpA, seen, true, 0},
		// shmem is a gauge: the copy charges what the removal uncharges. The hole for which
		// no v2 snapshot vouches for Memory.
		{"tmpfs: move 1 MiB to another tmpfs", [][]string{{"syncwrite", a("mv"), mib}}, []string{"move", a("mv"), "to", b("mv")}, tmpB, unseen, true, 0},
		{"tmpfs: 2000 empty files", nil, []string{"touch", a("files"), "2000"}, tmpA, unseen, false, 0},
	}
	// A tmpfs keeps user.* attributes from Linux 6.6 on; before, it refuses them, and
	// there is nothing for a walk to count.
	probe := a("probe")
	if err := os.WriteFile(probe, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	switch err := unix.Setxattr(probe, "user.probe", []byte("x"), 0); {
	case err == nil:
		cases = append(cases, v2Case{"tmpfs: 3000-byte xattr", nil, []string{"xattr", a("xattr"), "3000"}, tmpA, unseen, false, 0})
	case errors.Is(err, unix.EOPNOTSUPP):
		t.Logf("tmpfs: user.* xattrs refused by this kernel (before 6.6): %v; no xattr for a walk to count", err)
	default:
		t.Fatalf("setxattr user.probe on tmpfs: %v", err)
	}
	runV2Cases(t, pod, w, tmpA, append(cases, v2Case{"nothing (control)", nil, []string{"noop"}, tmpA, unseen, false, 0}))

}

// balancedV2 checks the writes a v2 snapshot sees only at their writeback: a new file whose
// pages the pod balances by truncating as many dirty ones (file and file_dirty stay level)
// moves nothing until written back, and io.stat's wbytes then; and a new file whose dirty
// pages are dropped by FALLOC_FL_ZERO_RANGE, which keeps the blocks allocated.
func balancedV2(t *testing.T, pod Pod, w *writer, disk string) {
	t.Helper()
	const mib, mibN = "1048576", 1 << 20
	d := func(name string) string { return filepath.Join(disk, name) }
	check := func(name string, setup [][]string, op []string, target string) {
		t.Helper()
		for _, s := range setup {
			w.do(t, s[0], s[1:]...)
		}
		// The setup's pages stay dirty: a sync here would write them back.
		time.Sleep(settle)
		before, used := readPod(t, pod), allocated(t, target)
		w.do(t, op[0], op[1:]...)
		time.Sleep(settle)
		mid := readPod(t, pod)
		grew := allocated(t, target) - used
		fswalktest.SyncFS(t, disk)
		time.Sleep(settle)
		after := readPod(t, pod)
		t.Logf("%-42s before writeback: %s  changed %v", name, delta(before, mid), mid != before)
		t.Logf("%-42s after sync:       %s  changed %v (%s grew %d B)", name, delta(before, after), after != before, filepath.Base(target), grew)
		// Before the writeback, what changes depends on the filesystem (a metadata page, a
		// block XFS writes when it truncates): logged. At the writeback, wbytes carries it.
		if grew < mibN {
			t.Errorf("%s: %s grew by %d B, want 1 MiB", name, target, grew)
		}
		if after.WriteBytes-before.WriteBytes < mibN {
			t.Errorf("%s: wbytes grew by %d B after the writeback, want at least 1 MiB", name, after.WriteBytes-before.WriteBytes)
		}
	}
	// Both volumes of one pod: the new file's volume grows by what the other shrinks.
	check("disk: new 1 MiB balanced by truncating 1 MiB dirty", [][]string{{"write", d("dirty"), mib}},
		[]string{"balance", d("balanced"), mib, d("dirty")}, d("balanced"))
	// FALLOC_FL_ZERO_RANGE over a new file's dirty pages: ext4 drops them and keeps the blocks
	// (unwritten extents), so the bytes are never written back; XFS writes the range back
	// first (xfs_flush_unmap_range).
	before := readPod(t, pod)
	w.do(t, "write", d("zeroed"), mib)
	w.do(t, "zerorange", d("zeroed"), mib)
	fswalktest.SyncFS(t, disk)
	time.Sleep(settle)
	after := readPod(t, pod)
	kept := allocated(t, d("zeroed"))
	t.Logf("%-42s after sync:       %s  changed %v (zeroed takes %d B)", "disk: new 1 MiB, dirty pages zero-ranged",
		delta(before, after), after != before, kept)
	if kept < mibN {
		t.Errorf("a zero-ranged 1 MiB file takes %d B, want its blocks kept", kept)
	}
	wrote := after.WriteBytes - before.WriteBytes
	var st unix.Statfs_t
	if err := unix.Statfs(disk, &st); err != nil {
		t.Fatal(err)
	}
	switch st.Type {
	case unix.EXT4_SUPER_MAGIC:
		if wrote != 0 {
			t.Errorf("ext4: the zero-ranged pages were written back (%d B): the measured hole is gone, update docs/change-signal.md", wrote)
		}
	case unix.XFS_SUPER_MAGIC:
		if wrote < mibN {
			t.Errorf("xfs: wbytes grew by %d B, want the range written back before it is zeroed", wrote)
		}
	}
}

// scaleWriteback scales the node's writeback settings down for t (expire 3 s, flusher every
// 1 s) and restores them after.
func scaleWriteback(t *testing.T) {
	t.Helper()
	for file, v := range map[string]string{"dirty_expire_centisecs": "300", "dirty_writeback_centisecs": "100"} {
		p := filepath.Join("/proc/sys/vm", file)
		old, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v), 0); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := os.WriteFile(p, old, 0); err != nil {
				t.Errorf("restoring %s: %v", p, err)
			}
		})
	}
}

// rotateV2: a pod keeps bytes dirty, never written back, by copying them into a new file and
// removing the old one before the old one's pages expire (an inode's dirty age starts when it
// is first dirtied): file and file_dirty stay level, wbytes does not move, and the bytes stay
// in the volume (a walk counts them: delayed allocation is in st_blocks). Under
// scaleWriteback's settings, in a pod cgroup that has written before (the table's): in a
// freshly made one, a lane run saw the bytes written back all the same. Either way the
// signal does not rely on the writeback: the sweep bounds such a pod.
func rotateV2(t *testing.T, pod Pod, w *writer, disk string) {
	t.Helper()
	fswalktest.SyncFS(t, disk)
	w.do(t, "write", filepath.Join(disk, "rot0"), "1048576")
	// Read at once (a 1 MiB write flushes the counters on read, below): a settle would
	// outlast the expiry.
	before := readPod(t, pod)
	const rounds = 16 // 8 s: more than twice the expiry plus the flusher's interval
	for i := range rounds {
		time.Sleep(500 * time.Millisecond)
		w.do(t, "move", filepath.Join(disk, "rot"+strconv.Itoa(i)), "to", filepath.Join(disk, "rot"+strconv.Itoa(i+1)))
	}
	// A 1 MiB write or move updates the memory controller's counters by far more than the
	// batch past which a read of memory.stat flushes them (memcg_rstat_updated,
	// mem_cgroup_flush_stats): no settle needed.
	after := readPod(t, pod)
	held := allocated(t, filepath.Join(disk, "rot"+strconv.Itoa(rounds)))
	t.Logf("%-42s %s  changed %v (the last copy takes %d B)", "disk: 1 MiB dirty, rotated 8 s (expiry 3 s)", delta(before, after),
		after != before, held)
	if held < 1<<20 {
		t.Errorf("the rotated file takes %d B, want 1 MiB", held)
	}
	if after.WriteBytes != before.WriteBytes {
		t.Errorf("rotated dirty bytes were written back (%d B): the measured hole is gone, update docs/change-signal.md",
			after.WriteBytes-before.WriteBytes)
	}
}

// TestSignalV2MemoryLimitedWriter: a writer under a memory.max smaller than what it writes
// keeps its page cache level (the kernel writes back and reclaims its pages to stay under
// the limit), so the gauges say little; io.stat's wbytes must carry the write.
func TestSignalV2MemoryLimitedWriter(t *testing.T) {
	requireV2(t)
	const limit, total = 16 << 20, 64 << 20
	disk := diskFS(t, "ext4", "")
	pod := v2Pod(t, "limited")
	if err := os.WriteFile(filepath.Join(pod.Dir, "memory.max"), []byte(strconv.Itoa(limit)), 0); err != nil {
		t.Fatal(err)
	}
	w := startWriter(t)
	w.join(t, pod.Dir)
	time.Sleep(settle)
	before := readPod(t, pod)
	w.do(t, "bigwrite", filepath.Join(disk, "big"), strconv.Itoa(total))
	time.Sleep(settle)
	after := readPod(t, pod)
	events, _ := os.ReadFile(filepath.Join(pod.Dir, "memory.events"))
	t.Logf("%d MiB written under memory.max %d MiB: %s  changed %v; file now %d B; memory.events %q",
		total>>20, limit>>20, delta(before, after), after != before, after.File, strings.Fields(string(events)))
	if after.File > limit {
		t.Errorf("page cache %d B above memory.max %d B", after.File, limit)
	}
	// What cannot stay in the page cache was written back under the pod's cgroup.
	if got := after.WriteBytes - before.WriteBytes; got < total-limit {
		t.Errorf("io.stat wbytes grew by %d B, want at least the %d B that cannot stay cached", got, total-limit)
	}
}

// TestSignalV2CgroupLifecycle: a container's cgroup removed (a restart) takes nothing from its
// pod's io.stat (rstat folds a dead child's counts into its parent), and a pod cgroup made
// again never compares equal to its predecessor, although every counter of both reads zero.
func TestSignalV2CgroupLifecycle(t *testing.T) {
	requireV2(t)
	disk := diskFS(t, "ext4", "")
	pod := v2Pod(t, "life")
	enableControllers(t, pod.Dir, "+memory +io")
	ctr := filepath.Join(pod.Dir, "ctr")
	makeCgroup(t, ctr)
	w := startWriter(t)
	w.join(t, ctr)
	w.do(t, "syncwrite", filepath.Join(disk, "f"), "1048576")
	time.Sleep(settle)
	written := readPod(t, pod)
	if written.WriteBytes < 1<<20 || written.File < 1<<20 {
		t.Fatalf("the container's fsync'd 1 MiB is not in its pod's counters: %+v", written)
	}
	w.stop()
	removeCgroup(t, ctr)
	time.Sleep(settle)
	gone := readPod(t, pod)
	t.Logf("pod with the container: %+v; after its cgroup was removed: %+v", written, gone)
	if gone.WriteBytes < written.WriteBytes || gone.WriteIOs < written.WriteIOs {
		t.Errorf("the container's cgroup removed, wbytes %d → %d, wios %d → %d: a later write could bring them back to an old mark",
			written.WriteBytes, gone.WriteBytes, written.WriteIOs, gone.WriteIOs)
	}

	// A container that writes and is gone before anyone reads its pod: its counts, still
	// pending in its own cgroup when that is removed, must reach the pod all the same.
	ctr2 := filepath.Join(pod.Dir, "ctr2")
	makeCgroup(t, ctr2)
	w2 := startWriter(t)
	w2.join(t, ctr2)
	w2.do(t, "syncwrite", filepath.Join(disk, "g"), "1048576")
	w2.stop()
	removeCgroup(t, ctr2)
	time.Sleep(settle)
	unread := readPod(t, pod)
	t.Logf("a second container's fsync'd 1 MiB, its cgroup removed before the pod was read: %s", delta(gone, unread))
	if unread.WriteBytes < gone.WriteBytes+1<<20 {
		t.Errorf("wbytes %d → %d: the removed container's 1 MiB is lost", gone.WriteBytes, unread.WriteBytes)
	}

	fresh := filepath.Join(pod.Dir, "again")
	makeCgroup(t, fresh)
	first := readPod(t, Pod{Dir: fresh, Version: V2})
	removeCgroup(t, fresh)
	makeCgroup(t, fresh)
	second := readPod(t, Pod{Dir: fresh, Version: V2})
	sameButID := first
	sameButID.Cgroup = second.Cgroup
	if first == second || sameButID != second {
		t.Errorf("a cgroup made again: %+v, then %+v; want only the inode to differ", first, second)
	}
}

// TestLocateRealV2Tree: in a real cgroup v2 hierarchy, Open detects v2 and Locate finds a
// cgroupfs and a systemd pod below a --cgroup-root of the test's, with auto; a pod whose
// cgroup lacks the io controller gets no snapshot (unsound), as a node without it would.
func TestLocateRealV2Tree(t *testing.T) {
	requireV2(t)
	pid := strconv.Itoa(os.Getpid())
	root := "/podcgroup-test-" + pid
	cfg := DefaultConfig()
	cfg.Root = root
	l, err := Open(cfg)
	if err != nil || l.Version() != V2 {
		t.Fatalf("Open: %v, %v; want v2", l, err)
	}
	const burstable, guaranteed, besteffort = "11111111-2222-3333-4444-555555555555", "66666666-7777-8888-9999-000000000000",
		"aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
	fsDir := makeV2Cgroups(t, root+"/kubepods/burstable/pod"+burstable, "+memory +io")
	sd := "podcgroup_test_" + pid
	sdDir := makeV2Cgroups(t, sd+".slice/"+sd+"-kubepods.slice/"+sd+"-kubepods-pod66666666_7777_8888_9999_000000000000.slice", "+memory +io")
	for _, tc := range []struct {
		uid, qos, dir string
		driver        Driver
	}{{burstable, QOSBurstable, fsDir, DriverCgroupfs}, {guaranteed, QOSGuaranteed, sdDir, DriverSystemd}} {
		p, err := l.Locate(tc.uid, tc.qos)
		if err != nil || p.Dir != tc.dir || p.Version != V2 || p.Driver != tc.driver {
			t.Fatalf("pod %s: %+v, %v; want %s (%s)", tc.uid, p, err, tc.dir, tc.driver)
		}
		s, err := l.Mark(tc.uid, tc.qos)
		if err != nil || s.Version != V2 || s.Cgroup == 0 || s.WriteBytes != 0 || s.File != 0 {
			t.Errorf("pod %s, no process ever in it: %+v, %v", tc.uid, s, err)
		}
	}
	// The BestEffort level enables memory only for its pods: io.stat is missing there.
	makeV2Cgroups(t, root+"/kubepods/besteffort", "+memory +io")
	enableControllers(t, filepath.Join(v2Mount, root, "kubepods/besteffort"), "+memory")
	makeCgroup(t, filepath.Join(v2Mount, root, "kubepods/besteffort/pod"+besteffort))
	wantReason(t, l, besteffort, QOSBestEffort, ReasonUnsound)
	wantReason(t, l, burstable, QOSBestEffort, ReasonNotFound)
}

// TestSignalV2Vouches: what Snapshot.Vouches and WritebackCharged say of the lane's ext4, XFS
// and tmpfs, against what the kernel does: a dirty page written by the pod's process and
// written back by another process (sync from the test, outside the pod) is charged to the
// pod's io.stat exactly where WritebackCharged says so.
func TestSignalV2Vouches(t *testing.T) {
	requireV2(t)
	tmp := filepath.Join(t.TempDir(), "tmpfs")
	if err := os.Mkdir(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	fswalktest.MountTmpfs(t, tmp, "size=16m")
	for _, tc := range []struct {
		name, fs, options string
		op                string
		medium            Medium
		says              bool // WritebackCharged
		charged           bool // the kernel charges the writeback to the pod
	}{
		{"ext4", "ext4", "", "write", Disk, true, true},
		{"xfs", "xfs", "", "write", Disk, true, true},
		{"tmpfs", "", "", "write", Memory, false, false},
		// The journal thread writes the data: nothing is charged to the pod.
		{"ext4 data=journal", "ext4", "data=journal", "write", Disk, false, false},
		// The same per file, by chattr +j (CAP_SYS_RESOURCE, ext4_ioctl_setflags): measured,
		// the flag is accepted and the writeback is still charged to the pod.
		{"ext4, file chattr +j", "ext4", "", "jwrite", Disk, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := tmp
			if tc.fs != "" {
				dir = diskFS(t, tc.fs, tc.options)
			}
			charged, err := WritebackCharged(dir)
			if err != nil || charged != tc.says {
				t.Errorf("WritebackCharged(%s) = %v, %v; want %v", tc.name, charged, err, tc.says)
			}
			m, err := MediumOf(dir)
			if err != nil || m != tc.medium {
				t.Errorf("MediumOf(%s) = %v, %v; want %v", tc.name, m, err, tc.medium)
			}
			pod := v2Pod(t, "vouch")
			w := startWriter(t)
			w.join(t, pod.Dir)
			unix.Sync()
			time.Sleep(settle)
			before := readPod(t, pod)
			if got := before.Vouches(m); got != (m == Disk) {
				t.Errorf("a v2 snapshot's Vouches(%v) = %v", m, got)
			}
			w.do(t, tc.op, filepath.Join(dir, "f"), "1048576")
			unix.Sync() // by the test's process, in the root cgroup
			time.Sleep(settle)
			after := readPod(t, pod)
			got := after.WriteBytes - before.WriteBytes
			t.Logf("%-18s WritebackCharged %-5v Vouches %-5v: 1 MiB written by the pod, synced by the test: %s", tc.name, charged,
				before.Vouches(m), delta(before, after))
			if tc.charged != (got >= 1<<20) {
				t.Errorf("want the writeback charged to the pod: %v, but its wbytes grew by %d B after another process synced its 1 MiB",
					tc.charged, got)
			}
		})
	}
}
