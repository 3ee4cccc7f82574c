package fswalktest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// KubeletFirstProjectID is the first project ID the kubelet hands out (fsquota.FirstQuota).
const KubeletFirstProjectID = 1048577

// Kernel ABI that golang.org/x/sys/unix does not carry (linux/fs.h).
const (
	fsIocFsGetXattr    = 0x801c581f // _IOR('X', 31, struct fsxattr)
	fsIocFsSetXattr    = 0x401c5820 // _IOW('X', 32, struct fsxattr)
	fsXflagProjInherit = 0x00000200
)

// fsxattr is struct fsxattr of linux/fs.h.
type fsxattr struct {
	Xflags, Extsize, Nextents, Projid, Cowextsize uint32
	_                                             [8]byte
}

// LoopFS is a filesystem of its own on a loop device, mounted for one test.
type LoopFS struct {
	Type    string
	MKFS    []string // mkfs command and its arguments; the image path is appended
	Options string   // mount options
}

var (
	// XFSNoQuota: XFS keeps project IDs without quota accounting.
	XFSNoQuota  = LoopFS{"xfs", []string{"mkfs.xfs", "-q", "-f"}, ""}
	XFSPrjQuota = LoopFS{"xfs", []string{"mkfs.xfs", "-q", "-f"}, "prjquota"}
	// Ext4PrjQuota keeps project quota accounting in the filesystem (feature quota, type
	// prjquota); ext4's project feature needs the kernel's quota support even to mount.
	Ext4PrjQuota = LoopFS{"ext4", []string{"mkfs.ext4", "-q", "-F", "-O", "quota,project", "-E", "quotatype=prjquota"}, "prjquota"}
)

// ErrMountRefused says that the kernel refused to mount the filesystem with these options
// (a kernel built without CONFIG_XFS_QUOTA or CONFIG_QFMT_V2, for prjquota).
var ErrMountRefused = errors.New("the kernel refused the mount")

// Mount makes a sparse image of size bytes (mkfs.xfs wants at least 300 MB, and an XFS of
// 512 MiB gives 64 MiB to its log), a loop device and a mount of it, all removed when the
// test ends, also when it fails. Not root, or no mkfs for the type: the test is skipped.
func (l LoopFS) Mount(t testing.TB, size int64) (string, error) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: loop devices and mounts")
	}
	if _, err := exec.LookPath(l.MKFS[0]); err != nil {
		t.Skipf("%s not installed (make deps installs it): %v", l.MKFS[0], err)
	}
	dir := t.TempDir()
	img, mnt := filepath.Join(dir, "fs.img"), filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(img)
	if err == nil {
		err = errors.Join(f.Truncate(size), f.Close())
	}
	if err != nil {
		t.Fatal(err)
	}
	run := func(name string, args ...string) string {
		t.Helper()
		out, err := exec.Command(name, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	run(l.MKFS[0], append(l.MKFS[1:], img)...)
	dev := run("losetup", "--find", "--show", img)
	t.Cleanup(func() {
		if out, err := exec.Command("losetup", "--detach", dev).CombinedOutput(); err != nil {
			t.Errorf("losetup --detach %s: %v: %s", dev, err, out)
		}
	})
	if err := unix.Mount(dev, mnt, l.Type, 0, l.Options); err != nil {
		return "", fmt.Errorf("%w: mount -t %s -o %q %s: %w", ErrMountRefused, l.Type, l.Options, dev, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(mnt, 0); err != nil {
			t.Errorf("umount %s: %v", mnt, err)
		}
	})
	return mnt, nil
}

// Project is the project ID of path and whether what is created in it inherits the ID.
func Project(path string) (id uint32, inherit bool, err error) {
	fd, x, err := openXattr(path)
	if err != nil {
		return 0, false, err
	}
	unix.Close(fd)
	return x.Projid, x.Xflags&fsXflagProjInherit != 0, nil
}

// SetProject sets the project ID of path and the inherit flag (meaningful on directories).
func SetProject(path string, id uint32, inherit bool) error {
	fd, x, err := openXattr(path)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	x.Projid = id
	if inherit {
		x.Xflags |= fsXflagProjInherit
	} else {
		x.Xflags &^= fsXflagProjInherit
	}
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), fsIocFsSetXattr, uintptr(unsafe.Pointer(&x))); errno != 0 {
		return fmt.Errorf("FS_IOC_FSSETXATTR %s project %d: %w", path, id, errno)
	}
	return nil
}

// AssignProject gives the directory dir the project ID id and the inherit flag, as the kubelet
// does (xfs_quota project -s), or fails the test.
func AssignProject(t testing.TB, dir string, id uint32) {
	t.Helper()
	if err := SetProject(dir, id, true); err != nil {
		t.Fatal(err)
	}
}

// SyncFS flushes dir's filesystem, so that delayed allocation is settled before a quota is
// compared with a walk.
func SyncFS(t testing.TB, dir string) {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Syncfs(fd); err != nil {
		t.Fatal(err)
	}
}

// openXattr opens path and reads its fsxattr; the caller closes fd.
func openXattr(path string) (fd int, x fsxattr, err error) {
	fd, err = unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, x, fmt.Errorf("open %s: %w", path, err)
	}
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), fsIocFsGetXattr, uintptr(unsafe.Pointer(&x))); errno != 0 {
		unix.Close(fd)
		return -1, x, fmt.Errorf("FS_IOC_FSGETXATTR %s: %w", path, errno)
	}
	return fd, x, nil
}
