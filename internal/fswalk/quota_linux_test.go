package fswalk

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/emptydir-guard/emptydir-guard/internal/fswalk/fswalktest"
)

// quotaVolume is a volume directory, below root as the kubelet lays them out, whose project
// ID is volID (0: none) under a parent directory with project ID parentID, filled with plain
// files, a directory, a hard link, a sparse file and a symbolic link, and synced.
func quotaVolume(t testing.TB, root string, parentID, volID uint32) (dir string) {
	t.Helper()
	dir = filepath.Join(root, "pods", "uid-1", "volumes", "kubernetes.io~empty-dir", "vol")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if parentID != 0 {
		fswalktest.AssignProject(t, filepath.Dir(dir), parentID)
	}
	if volID != 0 {
		fswalktest.AssignProject(t, dir, volID)
	}
	fillVolume(t, dir)
	return dir
}

// fillVolume writes plain files, a directory, a hard link, a sparse file and a symbolic link
// into dir, and syncs its filesystem.
func fillVolume(t testing.TB, dir string) {
	t.Helper()
	files := map[string]int{"a": 1 << 20, "sub/b": 300 << 10, "sub/deeper/c": 5000, "empty": 0}
	for name, size := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, bytes.Repeat([]byte{'x'}, size), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Link(filepath.Join(dir, "a"), filepath.Join(dir, "sub", "a-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	sparse, err := os.Create(filepath.Join(dir, "sparse"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sparse.WriteAt([]byte("end"), 64<<20); err != nil {
		t.Fatal(err)
	}
	if err := unix.Syncfs(int(sparse.Fd())); err != nil {
		t.Fatal(err)
	}
	if err := sparse.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestProjectQuotaMeasuresLikeTheWalk: on a real XFS and ext4 with project quota accounting,
// a volume under a project of its own is measured from the quota, with the bytes and inodes
// of the walk; a volume without a project ID, or whose project ID it shares with its parent
// directory (so the quota counts more than the volume), is not (the exporter walks it).
// Skipped where the kernel cannot mount with prjquota (built without CONFIG_XFS_QUOTA /
// CONFIG_QFMT_V2).
func TestProjectQuotaMeasuresLikeTheWalk(t *testing.T) {
	tests := []struct {
		name              string
		parentID, volID   uint32
		wantQuota         bool
		wantNoOwnProjectQ bool
	}{
		{"own project", 0, fswalktest.KubeletFirstProjectID, true, false},
		{"no project ID", 0, 0, false, true},
		{"project shared with the parent directory", fswalktest.KubeletFirstProjectID + 1, fswalktest.KubeletFirstProjectID + 1, false, true},
	}
	for _, fsys := range []fswalktest.LoopFS{fswalktest.XFSPrjQuota, fswalktest.Ext4PrjQuota} {
		t.Run(fsys.Type, func(t *testing.T) {
			mnt, err := fsys.Mount(t, 512<<20)
			if errors.Is(err, fswalktest.ErrMountRefused) {
				t.Skipf("this kernel has no %s project quotas: %v", fsys.Type, err)
			}
			for i, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					dir := quotaVolume(t, filepath.Join(mnt, fmt.Sprint("kubelet-", i)), tt.parentID, tt.volID)
					walked, err := MeasureDiskUsage(context.Background(), dir, Options{Concurrency: 2})
					if err != nil {
						t.Fatal(err)
					}
					quota, err := ReadProjectQuota(dir)
					if errors.Is(err, ErrNoOwnProjectQuota) != tt.wantNoOwnProjectQ {
						t.Errorf("ReadProjectQuota: %v, want ErrNoOwnProjectQuota: %v", err, tt.wantNoOwnProjectQ)
					}
					if (err == nil) != tt.wantQuota {
						t.Fatalf("ReadProjectQuota: %v; want an answer from the quota: %v", err, tt.wantQuota)
					}
					if tt.wantQuota && (quota.UsedBytes != walked.UsedBytes || quota.Inodes != walked.Inodes) {
						t.Errorf("the quota says %d bytes, %d inodes; the walk says %d bytes, %d inodes",
							quota.UsedBytes, quota.Inodes, walked.UsedBytes, walked.Inodes)
					}
				})
			}
		})
	}
}

// TestProjectQuotaFallsBackToTheWalk: on a real XFS without quota accounting (as on a kernel
// without quota support), a volume with a project ID of its own cannot be read from the
// quota, with an error that is not ErrNoOwnProjectQuota, and is still walked.
func TestProjectQuotaFallsBackToTheWalk(t *testing.T) {
	for _, fsys := range []fswalktest.LoopFS{fswalktest.XFSNoQuota} {
		t.Run(fsys.Type, func(t *testing.T) {
			mnt, err := fsys.Mount(t, 512<<20)
			if err != nil {
				t.Fatal(err)
			}
			dir := quotaVolume(t, filepath.Join(mnt, "kubelet"), 0, fswalktest.KubeletFirstProjectID)
			if _, err := ReadProjectQuota(dir); err == nil || errors.Is(err, ErrNoOwnProjectQuota) {
				t.Errorf("ReadProjectQuota without quota accounting: %v, want the quotactl error", err)
			}
			if walked, err := MeasureDiskUsage(context.Background(), dir, Options{Concurrency: 2}); err != nil || walked.UsedBytes <= 0 {
				t.Errorf("walk: %+v, %v; want the volume's bytes", walked, err)
			}
		})
	}
}

// BenchmarkProjectQuotaVsWalk measures a volume of 100k files by its project quota and by the
// walk, on a real XFS with project quota accounting, and reports the ratio quota/walk.
// Skipped where the kernel cannot mount with prjquota.
func BenchmarkProjectQuotaVsWalk(b *testing.B) {
	mnt, err := fswalktest.XFSPrjQuota.Mount(b, 1<<30) // 100k files do not fit in 512 MiB
	if errors.Is(err, fswalktest.ErrMountRefused) {
		b.Skipf("this kernel has no xfs project quotas: %v", err)
	}
	dir := quotaVolume(b, filepath.Join(mnt, "kubelet"), 0, fswalktest.KubeletFirstProjectID)
	for i := range 100 {
		sub := filepath.Join(dir, "many", fmt.Sprint(i))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			b.Fatal(err)
		}
		for j := range 1000 {
			if err := os.WriteFile(filepath.Join(sub, fmt.Sprint(j)), []byte("x"), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	measure := func(quota bool) time.Duration {
		start := time.Now()
		var err error
		if quota {
			_, err = ReadProjectQuota(dir)
		} else {
			_, err = MeasureDiskUsage(context.Background(), dir, Options{Concurrency: 4})
		}
		if err != nil {
			b.Fatalf("quota %v: %v", quota, err)
		}
		return time.Since(start)
	}
	var walk, quota time.Duration
	for b.Loop() {
		walk += measure(false)
		quota += measure(true)
	}
	b.ReportMetric(float64(walk.Nanoseconds())/float64(b.N), "ns/walk")
	b.ReportMetric(float64(quota.Nanoseconds())/float64(b.N), "ns/quota")
	b.ReportMetric(quota.Seconds()/walk.Seconds(), "quota/walk")
}

// TestProjectQuotaHoldsAgainstTenantMoves: the moves a tenant could try to make a volume's
// project quota disagree with its walk are refused by the kernel, on a real XFS and ext4 with
// project quotas, so the quota keeps answering what the walk (and GNU du) would:
//   - a file renamed or hard-linked into the volume from another project (another volume) or
//     from a directory of no project: EXDEV, so mv copies it and the copy is the volume's;
//   - a file renamed out of the volume to another directory of the same filesystem, through the
//     bind mounts the container sees: EXDEV across mounts, so it cannot leave the quota's
//     count while staying on the disk;
//   - the project ID changed or the inherit flag cleared from a user namespace (the kubelet
//     quotas only pods with hostUsers: false): EINVAL.
func TestProjectQuotaHoldsAgainstTenantMoves(t *testing.T) {
	for _, fsys := range []fswalktest.LoopFS{fswalktest.XFSPrjQuota, fswalktest.Ext4PrjQuota} {
		t.Run(fsys.Type, func(t *testing.T) {
			mnt, err := fsys.Mount(t, 512<<20)
			if errors.Is(err, fswalktest.ErrMountRefused) {
				t.Skipf("this kernel has no %s project quotas: %v", fsys.Type, err)
			}
			dir := quotaVolume(t, filepath.Join(mnt, "kubelet"), 0, fswalktest.KubeletFirstProjectID)
			other := quotaVolume(t, filepath.Join(mnt, "kubelet-other"), 0, fswalktest.KubeletFirstProjectID+1)
			plain := filepath.Join(mnt, "plain")
			if err := os.Mkdir(plain, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(plain, "f"), bytes.Repeat([]byte{'y'}, 200<<10), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, src := range []string{filepath.Join(other, "a"), filepath.Join(plain, "f")} {
				if err := os.Rename(src, filepath.Join(dir, "moved-in")); !errors.Is(err, unix.EXDEV) {
					t.Errorf("rename %s into the volume: %v, want EXDEV", src, err)
				}
				if err := os.Link(src, filepath.Join(dir, "linked-in")); !errors.Is(err, unix.EXDEV) {
					t.Errorf("link %s into the volume: %v, want EXDEV", src, err)
				}
			}
			// What mv does after EXDEV: a copy, created in the volume, counted in its project.
			data, err := os.ReadFile(filepath.Join(plain, "f"))
			if err == nil {
				err = os.WriteFile(filepath.Join(dir, "copied-in"), data, 0o644)
			}
			if err != nil {
				t.Fatal(err)
			}

			// The container sees the volume and any other directory through bind mounts.
			volView, plainView := filepath.Join(t.TempDir(), "vol"), filepath.Join(t.TempDir(), "plain")
			for view, src := range map[string]string{volView: dir, plainView: plain} {
				if err := os.Mkdir(view, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := unix.Mount(src, view, "", unix.MS_BIND, ""); err != nil {
					t.Fatalf("bind mount %s: %v", src, err)
				}
				t.Cleanup(func() {
					if err := unix.Unmount(view, 0); err != nil {
						t.Errorf("umount %s: %v", view, err)
					}
				})
			}
			if err := os.Rename(filepath.Join(volView, "sub", "b"), filepath.Join(plainView, "moved-out")); !errors.Is(err, unix.EXDEV) {
				t.Errorf("rename out of the volume across mounts: %v, want EXDEV", err)
			}

			out, err := runInUserNamespace(t, dir)
			if err != nil {
				t.Fatalf("the user namespace helper: %v: %s", err, out)
			}
			if want := "projid EINVAL\ninherit EINVAL\n"; string(out) != want {
				t.Errorf("project ID changes from a user namespace:\n%s\nwant:\n%s", out, want)
			}

			fswalktest.SyncFS(t, dir)
			quotaMatchesWalkAndDu(t, dir)
		})
	}
}

// TestProjectQuotaChargedByAHostUsersTenant: a project quota counts whatever carries its
// project ID, wherever it is, and the kernel lets any process of the initial user namespace
// give the files it owns any project ID. A tenant of a pod with hostUsers: true — root, or
// uid 1000 in a directory of its own inside its volume (the kubelet makes emptyDir directories 0777)
// — sets a victim volume's guessable project ID (the kubelet hands them out from 1048577 up)
// and the inherit flag on its directory and writes there: on XFS and ext4 the victim's quota then
// answers exactly the victim's walk plus the tenant's directory's, bytes and inodes. So a quota's
// answer is an upper bound of its volume, never proof on its own (issue 30, item 9).
func TestProjectQuotaChargedByAHostUsersTenant(t *testing.T) {
	for _, fsys := range []fswalktest.LoopFS{fswalktest.XFSPrjQuota, fswalktest.Ext4PrjQuota} {
		t.Run(fsys.Type, func(t *testing.T) {
			mnt, err := fsys.Mount(t, 512<<20)
			if errors.Is(err, fswalktest.ErrMountRefused) {
				t.Skipf("this kernel has no %s project quotas: %v", fsys.Type, err)
			}
			for i, uid := range []uint32{0, 1000} {
				t.Run(fmt.Sprint("uid ", uid), func(t *testing.T) {
					root := filepath.Join(mnt, fmt.Sprint("kubelet-", i))
					id := fswalktest.KubeletFirstProjectID + uint32(i)
					victim := quotaVolume(t, root, 0, id)
					own := filepath.Join(root, "pods", "uid-host-users", "volumes", "kubernetes.io~empty-dir", "vol")
					if err := os.MkdirAll(own, 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.Chmod(own, 0o777); err != nil {
						t.Fatal(err)
					}
					charged := fswalktest.ChargeProject(t, own, id, 3<<20, uid, uid)
					if got, inherit, err := fswalktest.Project(charged); err != nil || got != id || !inherit {
						t.Fatalf("the tenant's directory: project %d, inherit %v, %v; want %d, inherited", got, inherit, err, id)
					}
					fswalktest.SyncFS(t, root)

					quota, err := ReadProjectQuota(victim)
					if err != nil {
						t.Fatal(err)
					}
					var walked [2]DiskUsage
					for j, dir := range []string{victim, charged} {
						if walked[j], err = MeasureDiskUsage(context.Background(), dir, Options{Concurrency: 2}); err != nil {
							t.Fatal(err)
						}
					}
					if quota.UsedBytes != walked[0].UsedBytes+walked[1].UsedBytes || quota.Inodes != walked[0].Inodes+walked[1].Inodes {
						t.Errorf("the victim's quota says %d bytes, %d inodes; want its walk's %d, %d plus the tenant's directory's %d, %d",
							quota.UsedBytes, quota.Inodes, walked[0].UsedBytes, walked[0].Inodes, walked[1].UsedBytes, walked[1].Inodes)
					}
					if walked[1].UsedBytes < 3<<20 {
						t.Errorf("the tenant's directory holds %d bytes, want its 3 MiB at least", walked[1].UsedBytes)
					}
				})
			}
		})
	}
}

// TestHostTenantHelperProcess is not a test: fswalktest.ChargeProject runs it as the tenant.
func TestHostTenantHelperProcess(t *testing.T) { fswalktest.HostTenantHelperProcess(t) }

// userNamespaceHelperEnv names the directory whose project ID the helper process tries to change.
const userNamespaceHelperEnv = "FSWALK_TEST_USERNS_PROJECT_DIR"

// runInUserNamespace runs TestUserNamespaceHelperProcess in a new user namespace whose root
// is the host's root: the most a tenant of a hostUsers: false pod could be.
func runInUserNamespace(t *testing.T, dir string) ([]byte, error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestUserNamespaceHelperProcess$")
	cmd.Env = append(os.Environ(), userNamespaceHelperEnv+"="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}},
	}
	out, err := cmd.Output()
	return out, err
}

// TestUserNamespaceHelperProcess is not a test: runInUserNamespace runs it, inside a user
// namespace, to try the two changes of a directory's project state and print what the kernel said.
func TestUserNamespaceHelperProcess(t *testing.T) {
	dir := os.Getenv(userNamespaceHelperEnv)
	if dir == "" {
		t.Skip("run by runInUserNamespace only")
	}
	try := func(name string, change func(id uint32, inherit bool) (uint32, bool)) {
		id, inherit, err := fswalktest.Project(dir)
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		var errno unix.Errno
		id, inherit = change(id, inherit)
		if err := fswalktest.SetProject(dir, id, inherit); err != nil && !errors.As(err, &errno) {
			fmt.Println(err)
			os.Exit(1)
		}
		fmt.Println(name, unix.ErrnoName(errno))
	}
	try("projid", func(id uint32, inherit bool) (uint32, bool) { return id + 1, inherit })
	try("inherit", func(id uint32, _ bool) (uint32, bool) { return id, false })
	os.Exit(0)
}

// quotaMatchesWalkAndDu fails t unless dir is read from a project quota of its own with the
// walk's bytes and inodes, and GNU du agrees on the bytes.
func quotaMatchesWalkAndDu(t *testing.T, dir string) {
	t.Helper()
	walked, err := MeasureDiskUsage(context.Background(), dir, Options{Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	quota, err := ReadProjectQuota(dir)
	if err != nil {
		t.Fatalf("ReadProjectQuota %s: %v", dir, err)
	}
	if quota.UsedBytes != walked.UsedBytes || quota.Inodes != walked.Inodes {
		t.Errorf("the quota says %d bytes, %d inodes; the walk says %d bytes, %d inodes",
			quota.UsedBytes, quota.Inodes, walked.UsedBytes, walked.Inodes)
	}
	if du := gnuDu(t, dir); du != walked.UsedBytes {
		t.Errorf("GNU du -s -B1 -x says %d bytes, the walk and the quota %d", du, walked.UsedBytes)
	}
}

// gnuDu is what GNU du -s -B1 -x says of dir, in bytes. In the kernel lane busybox runs its
// own du before PATH, so GNU du is called by its path.
func gnuDu(t *testing.T, dir string) int64 {
	t.Helper()
	out, err := exec.Command("/usr/bin/du", "-s", "-B1", "-x", dir).Output()
	if err != nil {
		t.Fatalf("du: %v", err)
	}
	var n int64
	if _, err := fmt.Sscan(string(out), &n); err != nil {
		t.Fatalf("du output %q: %v", out, err)
	}
	return n
}

// TestProjectQuotaSetByTheKubeletsCommands: a volume directory put under a project quota with the
// very commands the kubelet runs (pkg/volume/util/fsquota/common: xfs_quota -t <its mount's
// line> -P/dev/null -D/dev/null -x -f <mount> -c 'limit -p bhard=… bsoft=… <id>', then
// 'project -s -p <dir> <id>'), on XFS and ext4, before the pod writes: read from the quota with
// the walk's and GNU du's bytes and the walk's inodes. The kubelet gives every disk emptyDir of
// a hostUsers: false pod a quota: without a sizeLimit (or pod limit) its byte limit is 0 (none),
// with one the filesystem's maximum (monitoring only, never enforcing).
func TestProjectQuotaSetByTheKubeletsCommands(t *testing.T) {
	for _, fsys := range []fswalktest.LoopFS{fswalktest.XFSPrjQuota, fswalktest.Ext4PrjQuota} {
		t.Run(fsys.Type, func(t *testing.T) {
			mnt, err := fsys.Mount(t, 512<<20)
			if errors.Is(err, fswalktest.ErrMountRefused) {
				t.Skipf("this kernel has no %s project quotas: %v", fsys.Type, err)
			}
			xfsQuota, err := exec.LookPath("xfs_quota")
			if err != nil {
				t.Fatalf("xfs_quota (xfsprogs), which the kubelet runs: %v", err)
			}
			for i, tc := range []struct {
				name  string
				bytes int64
			}{
				{"no sizeLimit", 0},
				{"sizeLimit", 1<<58 - 1}, // the kubelet's maxQuota for ext4, below XFS's
			} {
				t.Run(tc.name, func(t *testing.T) {
					id := fswalktest.KubeletFirstProjectID + uint32(i)
					dir := filepath.Join(mnt, fmt.Sprint("kubelet-", i), "pods", "uid", "volumes", "kubernetes.io~empty-dir", "vol")
					if err := os.MkdirAll(dir, 0o750); err != nil {
						t.Fatal(err)
					}
					runKubeletXFSQuota(t, xfsQuota, mnt, fmt.Sprintf("limit -p bhard=%d bsoft=%d %d", tc.bytes, tc.bytes, id))
					runKubeletXFSQuota(t, xfsQuota, mnt, fmt.Sprintf("project -s -p %s %d", dir, id))
					fillVolume(t, dir)
					quotaMatchesWalkAndDu(t, dir)
				})
			}
		})
	}
}

// runKubeletXFSQuota runs an xfs_quota command on mnt as the kubelet does: with a mounts file
// holding only that mount's line, numeric project IDs and no /etc/projects.
func runKubeletXFSQuota(t *testing.T, xfsQuota, mnt, command string) {
	t.Helper()
	mounts, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		t.Fatal(err)
	}
	var line string
	for l := range strings.Lines(string(mounts)) {
		if f := strings.Fields(l); len(f) > 1 && f[1] == mnt {
			line = l
		}
	}
	if line == "" {
		t.Fatalf("%s is not in /proc/self/mounts", mnt)
	}
	mountsFile := filepath.Join(t.TempDir(), "mounts")
	if err := os.WriteFile(mountsFile, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(xfsQuota, "-t", mountsFile, "-P/dev/null", "-D/dev/null", "-x", "-f", mnt, "-c", command).CombinedOutput()
	if err != nil {
		t.Fatalf("xfs_quota -c %q: %v: %s", command, err, out)
	}
}

// BenchmarkNodeQuotaVsWalk measures one collection cycle of a node whose disk emptyDirs are all
// quota-backed — 110 pods × 3 volumes, each a project of its own as the kubelet assigns them,
// NODE_QUOTA_FILES files in all (default 100,000) — once reading every volume's quota and once
// walking every volume, and reports the CPU time (user + system, this process) of each and
// their ratio. Run it in the kernel lane (docs/kernel-lane.md): emulated times mean nothing,
// the ratio does. Skipped where the kernel cannot mount with prjquota.
func BenchmarkNodeQuotaVsWalk(b *testing.B) {
	const pods, volumesPerPod = 110, 3
	files := 100_000
	if s := os.Getenv("NODE_QUOTA_FILES"); s != "" {
		if _, err := fmt.Sscan(s, &files); err != nil {
			b.Fatalf("NODE_QUOTA_FILES=%q: %v", s, err)
		}
	}
	mnt, err := fswalktest.XFSPrjQuota.Mount(b, 4<<30)
	if errors.Is(err, fswalktest.ErrMountRefused) {
		b.Skipf("this kernel has no xfs project quotas: %v", err)
	}
	var dirs []string
	perVolume := files / (pods * volumesPerPod)
	for p := range pods {
		for v := range volumesPerPod {
			dir := filepath.Join(mnt, "pods", fmt.Sprint("uid-", p), "volumes", "kubernetes.io~empty-dir", fmt.Sprint("v", v))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				b.Fatal(err)
			}
			fswalktest.AssignProject(b, dir, fswalktest.KubeletFirstProjectID+uint32(len(dirs)))
			for f := range perVolume {
				sub := filepath.Join(dir, fmt.Sprint(f/100))
				if f%100 == 0 {
					if err := os.Mkdir(sub, 0o755); err != nil {
						b.Fatal(err)
					}
				}
				if err := os.WriteFile(filepath.Join(sub, fmt.Sprint(f)), []byte("x"), 0o644); err != nil {
					b.Fatal(err)
				}
			}
			dirs = append(dirs, dir)
		}
	}
	cpu := func() time.Duration {
		var ru unix.Rusage
		if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
			b.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	cycle := func(quota bool) time.Duration {
		start := cpu()
		for _, dir := range dirs {
			var err error
			if quota {
				_, err = ReadProjectQuota(dir)
			} else {
				_, err = MeasureDiskUsage(context.Background(), dir, Options{Concurrency: 4})
			}
			if err != nil {
				b.Fatalf("quota %v, %s: %v", quota, dir, err)
			}
		}
		return cpu() - start
	}
	var walk, quota time.Duration
	for b.Loop() {
		walk += cycle(false)
		quota += cycle(true)
	}
	b.ReportMetric(float64(len(dirs)), "volumes")
	b.ReportMetric(float64(perVolume*len(dirs)), "files")
	b.ReportMetric(float64(walk.Nanoseconds())/float64(b.N), "cpu-ns/walk-cycle")
	b.ReportMetric(float64(quota.Nanoseconds())/float64(b.N), "cpu-ns/quota-cycle")
	b.ReportMetric(quota.Seconds()/walk.Seconds(), "quota/walk")
}
