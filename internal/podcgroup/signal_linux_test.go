package podcgroup

import (
	"bufio"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/emptydir-guard/emptydir-guard/internal/fswalk/fswalktest"
)

// settle outlasts the memory controller's periodic flush of its per-CPU counters (FLUSH_TIME,
// 2 s, mm/memcontrol.c): a snapshot read sooner may not show a small change yet.
const settle = 2500 * time.Millisecond

// requireV1 skips t unless the host's cgroups are v1 (the kernel lane tests v2), and needs root.
func requireV1(t *testing.T) *Locator {
	t.Helper()
	fswalktest.RequireRoot(t, "making cgroups")
	l, err := Open(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if l.Version() != V1 {
		t.Skipf("the host's cgroups are v%d; this test makes v1 cgroups", l.Version())
	}
	return l
}

// ownCgroup is this process's cgroup in the v1 hierarchy of controller (/proc/self/cgroup):
// the test's cgroups go below it, so whatever limits it holds the writers too.
func ownCgroup(t *testing.T, controller string) string {
	t.Helper()
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) == 3 && strings.Contains(","+parts[1]+",", ","+controller+",") {
			return filepath.Join("/sys/fs/cgroup", controller, parts[2])
		}
	}
	t.Fatalf("no %s cgroup in /proc/self/cgroup", controller)
	return ""
}

// testCgroups makes a memory and a blkio cgroup of the given name below this process's own.
func testCgroups(t *testing.T, name string) (memory, blkio string) {
	t.Helper()
	memory = filepath.Join(ownCgroup(t, "memory"), name)
	blkio = filepath.Join(ownCgroup(t, "blkio"), name)
	makeCgroup(t, memory)
	makeCgroup(t, blkio)
	return memory, blkio
}

// allocated is what path takes on its filesystem (st_blocks, directories included), as a walk
// counts it; 0 when it is not there.
func allocated(t *testing.T, path string) int64 {
	t.Helper()
	var total int64
	err := filepath.WalkDir(path, func(p string, _ fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		total += st.Blocks * 512
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return total
}

// gauges are what a pod's cgroup holds now, logged beside a change to tell a write's pages
// (cache) from the writer's own (rss).
type gauges struct{ rss, cache int64 }

func (a gauges) Sub(b gauges) gauges { return gauges{a.rss - b.rss, a.cache - b.cache} }

func memoryGauges(t *testing.T, dir string) gauges {
	t.Helper()
	v := readFields(t, filepath.Join(dir, "memory.stat"), "total_rss", "total_cache")
	return gauges{int64(v[0]), int64(v[1])}
}

// Whether a write changes the snapshot, as the kernel's code says it must (docs/change-signal.md).
type expect int

const (
	seen   expect = iota // a counter must move
	unseen               // none may: a hole when the write grew something
	either               // depends on whether the filesystem's metadata pages were cached already
)

// TestSignalV1Writes runs a writer in a memory and a blkio cgroup of its own, as a pod's
// container, has it write in each way a tenant can, and checks which writes change the pod's
// snapshot and which grow its files without changing it (the holes the caller bounds).
func TestSignalV1Writes(t *testing.T) {
	if testing.Short() {
		t.Skip("80 s: each write waits out the counters' flush")
	}
	requireV1(t)
	memory, blkio := testCgroups(t, "podcgroup-writes-"+strconv.Itoa(os.Getpid()))
	disk := t.TempDir()
	tmpA, tmpB := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	for _, d := range []string{tmpA, tmpB} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		fswalktest.MountTmpfs(t, d, "size=16m")
	}
	var st unix.Statfs_t
	if err := unix.Statfs(disk, &st); err != nil {
		t.Fatal(err)
	}
	t.Logf("disk: %s (statfs magic %#x)", disk, st.Type)

	w := startWriter(t)
	// Every operation, at the sizes below, twice before joining: the writer's code, stacks and
	// heap (the garbage of 2000 file names) are then charged to this process's cgroup, not to
	// the one the test reads, where they would pass for a write.
	warm := t.TempDir()
	for i := range 2 {
		for _, op := range [][]string{{"syncwrite", "w1", "1048576"}, {"append", "w1", "65536"}, {"overwrite", "w1", "65536"},
			{"direct", "w2", "1048576"}, {"sparse", "w3", "1048576"}, {"fallocate", "w4", "1048576"}, {"touch", "w5", "2000"},
			{"mkdir", "w6", "200"}, {"xattr", "w7", "3000"}, {"write", "w8", "1048576"}, {"move", "w8", "to", "w9"}} {
			op[1] = filepath.Join(warm, strconv.Itoa(i)+op[1])
			if op[0] == "move" {
				op[3] = filepath.Join(warm, strconv.Itoa(i)+op[3])
			}
			w.do(t, op[0], op[1:]...)
		}
	}
	w.do(t, "freeze")
	w.join(t, memory, blkio)
	pod := Pod{Dir: memory, Version: V1}

	d := func(name string) string { return filepath.Join(disk, name) }
	const mib = "1048576"
	for _, tc := range []struct {
		name   string
		setup  [][]string
		op     []string
		target string // what a walk would measure
		want   expect
		grows  bool
	}{
		{"nothing (control)", nil, []string{"noop"}, disk, unseen, false},
		{"disk: new file, 1 MiB, buffered", nil, []string{"write", d("new"), mib}, d("new"), seen, true},
		{"disk: new file, 1 MiB, fsync", nil, []string{"syncwrite", d("synced"), mib}, d("synced"), seen, true},
		{"disk: append 64 KiB, fsync", [][]string{{"syncwrite", d("log"), "65536"}}, []string{"append", d("log"), "65536"}, d("log"), seen, true},
		{"disk: overwrite 64 KiB in place, fsync", [][]string{{"syncwrite", d("db"), "65536"}}, []string{"overwrite", d("db"), "65536"}, d("db"), unseen, false},
		{"disk: fill 1 MiB of cached hole, fsync", [][]string{{"sparse", d("sparse"), mib}}, []string{"overwrite", d("sparse"), mib}, d("sparse"), unseen, true},
		// No data page: a hole, but ext4 may first read a metadata page (the extent tree's,
		// a bitmap's) into the page cache, charged here (a make test run: 5 pages), as in v2.
		{"disk: fallocate 1 MiB", nil, []string{"fallocate", d("falloc"), mib}, d("falloc"), either, true},
		{"disk: new file, 1 MiB, O_DIRECT", nil, []string{"direct", d("direct"), mib}, d("direct"), either, true},
		{"disk: 2000 empty files", nil, []string{"touch", d("files"), "2000"}, d("files"), either, true},
		{"disk: 200 empty directories", nil, []string{"mkdir", d("directories"), "200"}, d("directories"), either, true},
		{"disk: 3000-byte xattr", nil, []string{"xattr", d("xattr"), "3000"}, d("xattr"), either, true},
		{"tmpfs: new file, 1 MiB", nil, []string{"write", filepath.Join(tmpA, "new"), mib}, tmpA, seen, true},
		{"tmpfs: fallocate 1 MiB", nil, []string{"fallocate", filepath.Join(tmpA, "falloc"), mib}, tmpA, seen, true},
		{"tmpfs: move 1 MiB to another tmpfs", [][]string{{"syncwrite", filepath.Join(tmpA, "mv"), mib}},
			[]string{"move", filepath.Join(tmpA, "mv"), "to", filepath.Join(tmpB, "mv")}, tmpB, seen, true},
		{"tmpfs: 2000 empty files", nil, []string{"touch", filepath.Join(tmpA, "files"), "2000"}, tmpA, unseen, false},
		// A tmpfs keeps user.* attributes in kernel memory (counted as kernel memory, no page
		// charged): no block grows, yet the exporter counts them (fswalk's XattrBytes).
		{"tmpfs: 3000-byte xattr", nil, []string{"xattr", filepath.Join(tmpA, "xattr"), "3000"}, tmpA, unseen, false},
		{"nothing (control, again)", nil, []string{"noop"}, disk, unseen, false},
	} {
		for _, op := range tc.setup {
			w.do(t, op[0], op[1:]...)
		}
		unix.Sync() // no earlier write's writeback may move total_dirty during this one
		time.Sleep(settle)
		before, err := pod.Read()
		if err != nil {
			t.Fatal(err)
		}
		used, gauges := allocated(t, tc.target), memoryGauges(t, memory)
		w.do(t, tc.op[0], tc.op[1:]...)
		time.Sleep(settle)
		after, err := pod.Read()
		if err != nil {
			t.Fatal(err)
		}
		grew := allocated(t, tc.target) - used
		changed := after != before
		delta := memoryGauges(t, memory).Sub(gauges)
		t.Logf("%-40s grew %8d B  pgpgin %+4d  dirty %+7d  writeback %+d  changed %-5v  (rss %+d B, cache %+d B)", tc.name, grew,
			int64(after.PgpgIn-before.PgpgIn), int64(after.Dirty-before.Dirty), int64(after.Writeback-before.Writeback), changed,
			delta.rss, delta.cache)
		if tc.grows != (grew > 0) {
			t.Errorf("%s: grew %d bytes, want growth %v", tc.name, grew, tc.grows)
		}
		// Only the writer charges pages to its cgroup, so total_pgpgin moves by its doing alone,
		// but the writer is a Go program whose runtime may touch a new page of its own now and
		// then (rss): a write is seen when it charged a page of file or tmpfs (cache grew, or
		// more pages were charged than the writer's own memory grew by), unseen when nothing
		// but the writer's own memory was charged. total_dirty also moves when anyone dirties
		// a metadata page charged to the cgroup (an inode table block the writer read first),
		// which no tenant has to allow: logged, not asserted. The cache may shrink meanwhile
		// (reclaim), which charges nothing.
		pages := int64(after.PgpgIn - before.PgpgIn)
		fileCharged := delta.cache > 0 || pages*4096 > delta.rss
		switch {
		case tc.want == seen && (pages == 0 || !fileCharged):
			t.Errorf("%s: %d pages charged, cache %+d B, rss %+d B: want a charge for the write", tc.name, pages, delta.cache, delta.rss)
		case tc.want == unseen && fileCharged:
			t.Errorf("%s: %d pages charged, cache %+d B, rss %+d B: want none but the writer's own memory", tc.name, pages, delta.cache, delta.rss)
		}
	}
	blk, err := os.ReadFile(filepath.Join(blkio, "blkio.throttle.io_service_bytes_recursive"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("blkio.throttle.io_service_bytes_recursive after every write: %q", blk)
}
