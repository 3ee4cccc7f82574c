package exporter

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// gnuDU is the oracle: `du -s -B1 -x` of GNU coreutils.
func gnuDU(t *testing.T, dir string) int64 { return gnuDuTotal(t, "-B1", dir) }

// gnuInodes is `du -s --inodes -x`, which counts hard-linked inodes once as we do.
func gnuInodes(t *testing.T, dir string) int64 { return gnuDuTotal(t, "--inodes", dir) }

// gnuDuTotal runs `du -s -x unit dir` and returns its total.
func gnuDuTotal(t *testing.T, unit, dir string) int64 {
	t.Helper()
	out, err := exec.Command("du", "-s", "-x", unit, dir).Output()
	if err != nil {
		t.Fatalf("du %s %s: %v", unit, dir, err)
	}
	n, err := strconv.ParseInt(strings.Fields(string(out))[0], 10, 64)
	if err != nil {
		t.Fatalf("parsing du output %q: %v", out, err)
	}
	return n
}

func writeFile(t *testing.T, path string, size int) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, make([]byte, size), 0o644); err != nil {
		t.Fatal(err)
	}
}

func measure(t *testing.T, dir string, concurrency int) DiskUsage {
	t.Helper()
	du, err := MeasureDiskUsage(context.Background(), dir, concurrency)
	if err != nil {
		t.Fatalf("MeasureDiskUsage(%s): %v", dir, err)
	}
	return du
}

// TestMeasureDiskUsageMatchesGNUDu builds trees with the shapes that trip naive
// walkers and checks bytes and inodes against GNU du, at several concurrencies.
func TestMeasureDiskUsageMatchesGNUDu(t *testing.T) {
	cases := []struct {
		name  string
		build func(t *testing.T, dir string)
	}{
		{"empty", func(t *testing.T, dir string) {}},
		{"flat files", func(t *testing.T, dir string) {
			for i := range 50 {
				writeFile(t, filepath.Join(dir, fmt.Sprintf("f%02d", i)), i*1000)
			}
		}},
		{"nested folders", func(t *testing.T, dir string) {
			p := dir
			for i := range 30 {
				p = filepath.Join(p, fmt.Sprintf("d%d", i))
				writeFile(t, filepath.Join(p, "data"), 4097*i)
				for j := range 3 {
					writeFile(t, filepath.Join(p, fmt.Sprintf("side%d", j), "x"), 100)
				}
			}
		}},
		{"hard links counted once", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, "big"), 1<<20)
			for i := range 5 {
				sub := filepath.Join(dir, fmt.Sprintf("sub%d", i))
				if err := os.MkdirAll(sub, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Link(filepath.Join(dir, "big"), filepath.Join(sub, "link")); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{"sparse file counts allocated blocks", func(t *testing.T, dir string) {
			f, err := os.Create(filepath.Join(dir, "sparse"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteAt([]byte("end"), 100<<20); err != nil {
				t.Fatal(err)
			}
		}},
		{"symlinks not followed", func(t *testing.T, dir string) {
			outside := t.TempDir()
			writeFile(t, filepath.Join(outside, "huge"), 4<<20)
			if err := os.Symlink(filepath.Join(outside, "huge"), filepath.Join(dir, "to-file")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(outside, filepath.Join(dir, "to-dir")); err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(dir, "own"), 10000)
		}},
		{"wide folder beyond one read batch", func(t *testing.T, dir string) {
			for i := range 3*readDirBatch + 7 {
				writeFile(t, filepath.Join(dir, "wide", strconv.Itoa(i)), 1)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.build(t, dir)
			wantBytes, wantInodes := gnuDU(t, dir), gnuInodes(t, dir)
			for _, conc := range []int{1, 3, 16} {
				got := measure(t, dir, conc)
				if got.UsedBytes != wantBytes || got.Inodes != wantInodes || got.Unreadable != 0 {
					t.Errorf("concurrency %d: got %+v, want UsedBytes=%d Inodes=%d (GNU du)", conc, got, wantBytes, wantInodes)
				}
			}
		})
	}
}

func TestMeasureDiskUsageHardLinksAndSparseFiles(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a"), 1<<20)
	one := measure(t, dir, 4)
	for i := range 3 {
		if err := os.Link(filepath.Join(dir, "a"), filepath.Join(dir, fmt.Sprintf("link%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if linked := measure(t, dir, 4); linked.UsedBytes != one.UsedBytes || linked.Inodes != one.Inodes {
		t.Errorf("hard links changed the count: before %+v, after %+v", one, linked)
	}

	f, err := os.Create(filepath.Join(dir, "sparse"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 30); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if sparse := measure(t, dir, 4); sparse.UsedBytes-one.UsedBytes > 64<<10 {
		t.Errorf("a 1 GiB hole added %d bytes; allocated blocks, not apparent size, must count", sparse.UsedBytes-one.UsedBytes)
	}
}

func TestMeasureDiskUsageRootErrors(t *testing.T) {
	dir := t.TempDir()
	_, err := MeasureDiskUsage(context.Background(), filepath.Join(dir, "missing"), 2)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing root: got %v, want ErrNotExist", err)
	}
	writeFile(t, filepath.Join(dir, "file"), 10)
	if _, err := MeasureDiskUsage(context.Background(), filepath.Join(dir, "file"), 2); err == nil ||
		!strings.Contains(err.Error(), "not a directory") {
		t.Errorf("file as root: got %v, want a not-a-directory error", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := MeasureDiskUsage(ctx, dir, 2); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: got %v, want context.Canceled", err)
	}
}

// TestMeasureDiskUsageDoesNotCrossFilesystems mounts a tmpfs inside the tree; its
// content belongs to another filesystem and must not count, as with du -x.
func TestMeasureDiskUsageDoesNotCrossFilesystems(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "own"), 8192)
	mnt := filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	before := measure(t, dir, 2)
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=16m"); err != nil {
		t.Skipf("cannot mount tmpfs here: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(mnt, unix.MNT_DETACH) })
	writeFile(t, filepath.Join(mnt, "elsewhere"), 4<<20)

	after := measure(t, dir, 2)
	// The mount point now shows the tmpfs root instead of the folder; either way
	// the 4 MiB inside the tmpfs must not count.
	if after.UsedBytes > before.UsedBytes {
		t.Errorf("walk crossed into the tmpfs: %d bytes before, %d after", before.UsedBytes, after.UsedBytes)
	}
	if want := gnuDU(t, dir); after.UsedBytes != want {
		t.Errorf("got %d bytes, GNU du -x says %d", after.UsedBytes, want)
	}
}

// TestMeasureDiskUsageUnreadableEntries runs the walk as an unprivileged user over
// a tree with a folder it may not read: the walk goes on and counts it.
func TestMeasureDiskUsageUnreadableEntries(t *testing.T) {
	if os.Getenv("EMPTYDIR_DU_CHILD") != "" {
		du, err := MeasureDiskUsage(context.Background(), os.Getenv("EMPTYDIR_DU_CHILD"), 2)
		if err != nil {
			fmt.Printf("ERR %v\n", err)
			os.Exit(1)
		}
		fmt.Printf("RESULT %d %d %d\n", du.UsedBytes, du.Inodes, du.Unreadable)
		os.Exit(0)
	}
	base, err := os.MkdirTemp("", "du-perm-")
	if err != nil {
		t.Fatal(err)
	}
	// The tree to walk sits beside the copied test binary, so the copy is not counted.
	dir := filepath.Join(base, "tree")
	t.Cleanup(func() { _ = os.Chmod(filepath.Join(dir, "secret"), 0o755); _ = os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "open", "a"), 5000)
	writeFile(t, filepath.Join(dir, "secret", "b"), 1<<20)
	if err := os.Chmod(filepath.Join(dir, "secret"), 0o700); err != nil {
		t.Fatal(err)
	}

	var du DiskUsage
	if os.Geteuid() == 0 {
		// Root reads everything: re-run this test as nobody to meet EACCES for real.
		// The test binary sits in a folder only root may enter: copy it out.
		bin := filepath.Join(base, "du.test")
		self, err := os.ReadFile(os.Args[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(bin, self, 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "-test.run=^TestMeasureDiskUsageUnreadableEntries$")
		cmd.Env = append(os.Environ(), "EMPTYDIR_DU_CHILD="+dir)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("walk as nobody: %v\n%s", err, out)
		}
		var line string
		for _, l := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(l, "RESULT ") {
				line = l
			}
		}
		if _, err := fmt.Sscanf(line, "RESULT %d %d %d", &du.UsedBytes, &du.Inodes, &du.Unreadable); err != nil {
			t.Fatalf("child output %q: %v", out, err)
		}
	} else {
		if err := os.Chmod(filepath.Join(dir, "secret"), 0); err != nil {
			t.Fatal(err)
		}
		du = measure(t, dir, 2)
	}
	if du.Unreadable != 1 {
		t.Errorf("Unreadable = %d, want 1 (the secret folder)", du.Unreadable)
	}
	if du.UsedBytes < 5000 || du.UsedBytes >= 1<<20 {
		t.Errorf("UsedBytes = %d: want the readable file counted and the unreadable one not", du.UsedBytes)
	}
}

// TestMeasureDiskUsageToleratesVanishingEntries deletes files while the walk runs:
// vanished entries are neither errors nor counted twice.
func TestMeasureDiskUsageToleratesVanishingEntries(t *testing.T) {
	dir := t.TempDir()
	var paths []string
	for d := range 40 {
		for f := range 100 {
			p := filepath.Join(dir, fmt.Sprintf("d%02d", d), fmt.Sprintf("f%03d", f))
			writeFile(t, p, 4096)
			paths = append(paths, p)
		}
	}
	full := measure(t, dir, 4)
	for round := range 5 {
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := round; i < len(paths); i += 5 {
				_ = os.Remove(paths[i])
			}
			_ = os.RemoveAll(filepath.Join(dir, fmt.Sprintf("d%02d", 39-round)))
		}()
		du, err := MeasureDiskUsage(context.Background(), dir, 4)
		wg.Wait()
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if du.Unreadable != 0 {
			t.Errorf("round %d: %d entries reported unreadable; vanished entries are not errors", round, du.Unreadable)
		}
		if du.UsedBytes > full.UsedBytes {
			t.Errorf("round %d: %d bytes, more than the full tree's %d", round, du.UsedBytes, full.UsedBytes)
		}
	}
	if got, want := measure(t, dir, 4).UsedBytes, gnuDU(t, dir); got != want {
		t.Errorf("after the deletions: %d bytes, GNU du says %d", got, want)
	}
}
