package fswalk

import (
	"fmt"
	"path/filepath"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Kernel ABI that golang.org/x/sys/unix does not carry (linux/fs.h, linux/quota.h).
const (
	fsIocFsGetXattr      = 0x801c581f // _IOR('X', 31, struct fsxattr)
	fsXflagProjInherit   = 0x00000200
	qGetQuota            = 0x800007
	prjQuota             = 2
	qifSpace, qifInodes  = 1 << 1, 1 << 3
	quotaGetQuotaCommand = qGetQuota<<8 | prjQuota // QCMD(Q_GETQUOTA, PRJQUOTA)
)

// fsxattr is struct fsxattr of linux/fs.h.
type fsxattr struct {
	Xflags, Extsize, Nextents, Projid, Cowextsize uint32
	_                                             [8]byte
}

// ifDqblk is struct if_dqblk of linux/quota.h.
type ifDqblk struct {
	BHardLimit, BSoftLimit, CurSpace  uint64
	IHardLimit, ISoftLimit, CurInodes uint64
	BTime, ITime                      uint64
	Valid                             uint32
	_                                 uint32
}

// ReadProjectQuota reads the usage of the volume directory dir from its project quota: what
// the kernel already counts for the project, in O(1) whatever the volume holds. It answers
// only when the quota counts exactly this volume, as the kubelet sets it up (pkg/volume/util/
// fsquota): a non-zero project ID on dir with the inherit flag, so everything created below
// carries it (and the kernel refuses links and renames across projects), and a project ID
// different from the parent directory's, so it is not one inherited from higher up that would
// count other volumes too. A tenant in a user namespace (the kubelet applies quotas only to
// pods with hostUsers: false) cannot change project IDs. Reading a project quota needs
// CAP_SYS_ADMIN and a kernel with quotactl_fd (5.14); any error means: walk.
func ReadProjectQuota(dir string) (DiskUsage, error) {
	fd, err := unix.Open(dir, dirFlags, 0)
	if err != nil {
		return DiskUsage{}, fmt.Errorf("open %s: %w", dir, err)
	}
	defer unix.Close(fd)
	own, err := projectOf(fd)
	if err != nil {
		return DiskUsage{}, fmt.Errorf("project ID of %s: %w", dir, err)
	}
	if own.Projid == 0 || own.Xflags&fsXflagProjInherit == 0 {
		return DiskUsage{}, ErrNoOwnProjectQuota
	}
	parentFd, err := unix.Open(filepath.Dir(dir), dirFlags, 0)
	if err != nil {
		return DiskUsage{}, fmt.Errorf("open parent of %s: %w", dir, err)
	}
	parent, err := projectOf(parentFd)
	unix.Close(parentFd)
	if err != nil {
		return DiskUsage{}, fmt.Errorf("project ID of the parent of %s: %w", dir, err)
	}
	if parent.Projid == own.Projid {
		return DiskUsage{}, ErrNoOwnProjectQuota
	}

	var dq ifDqblk
	if _, _, errno := unix.Syscall6(unix.SYS_QUOTACTL_FD, uintptr(fd), quotaGetQuotaCommand,
		uintptr(own.Projid), uintptr(unsafe.Pointer(&dq)), 0, 0); errno != 0 {
		return DiskUsage{}, fmt.Errorf("quotactl_fd Q_GETQUOTA project %d: %w", own.Projid, errno)
	}
	if dq.Valid&(qifSpace|qifInodes) != qifSpace|qifInodes {
		return DiskUsage{}, fmt.Errorf("quota of project %d has no usage (valid %#x)", own.Projid, dq.Valid)
	}
	return DiskUsage{UsedBytes: int64(dq.CurSpace), Inodes: int64(dq.CurInodes)}, nil
}

// projectOf returns the project ID and flags of the open file fd (FS_IOC_FSGETXATTR).
func projectOf(fd int) (fsxattr, error) {
	var x fsxattr
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), fsIocFsGetXattr, uintptr(unsafe.Pointer(&x))); errno != 0 {
		return fsxattr{}, errno
	}
	return x, nil
}
