package podcgroup

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// detectHierarchy tells v2 (mount is a cgroup2 filesystem) from v1 (mount holds a v1
// memory hierarchy, with or without a v2 one beside it at unified/, which then has no memory
// controller) by the filesystems' magic numbers, and returns the directory pods are below.
func detectHierarchy(mount string) (Version, string, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(mount, &st); err != nil {
		return 0, "", fmt.Errorf("statfs %s: %w", mount, err)
	}
	if st.Type == unix.CGROUP2_SUPER_MAGIC {
		return V2, mount, nil
	}
	memory := filepath.Join(mount, "memory")
	if err := unix.Statfs(memory, &st); err != nil {
		return 0, "", fmt.Errorf("%s is no cgroup2 filesystem, and statfs %s: %w", mount, memory, err)
	}
	if st.Type != unix.CGROUP_SUPER_MAGIC {
		return 0, "", fmt.Errorf("%s is no cgroup2 filesystem, and %s no cgroup v1 hierarchy (magic %#x)", mount, memory, st.Type)
	}
	return V1, memory, nil
}

// dirID is the inode number of a cgroup's directory (its kernfs node: a new cgroup gets a new one).
func dirID(dir string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return 0, &os.PathError{Op: "lstat", Path: dir, Err: err}
	}
	return st.Ino, nil
}

// WritebackCharged reports whether the filesystem holding dir charges a dirty page's
// writeback to the cgroup that owns the file's inode (cgroup writeback, SB_I_CGROUPWB), as
// ext2/ext4, XFS, Btrfs and F2FS do (cgroup-v2.rst, "Writeback"); elsewhere v2's io.stat
// sees only direct I/O. ext4 mounted data=journal does not: the journal thread writes the
// data (measured in the kernel lane: a pod's synced 1 MiB left its wbytes at 0), so an ext4
// is charged only where /proc/self/mountinfo shows its mount without data=journal.
func WritebackCharged(dir string) (bool, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return false, fmt.Errorf("statfs %s: %w", dir, err)
	}
	switch st.Type {
	case unix.EXT4_SUPER_MAGIC:
		opts, err := superOptions(dir, "ext4")
		if err != nil {
			return false, err
		}
		return !slices.Contains(strings.Split(opts, ","), "data=journal"), nil
	case unix.XFS_SUPER_MAGIC, unix.BTRFS_SUPER_MAGIC, unix.F2FS_SUPER_MAGIC:
		return true, nil
	}
	return false, nil
}

// superOptions is the super options field of the mountinfo line of dir's filesystem (found by
// its device number), which ext4 fills from ext4_show_options (data=journal among them).
func superOptions(dir, fstype string) (string, error) {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return "", &os.PathError{Op: "stat", Path: dir, Err: err}
	}
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	return mountinfoSuperOptions(b, unix.Major(st.Dev), unix.Minor(st.Dev), fstype)
}

// mountinfoSuperOptions finds the super options of the filesystem on device major:minor of
// type fstype in /proc/self/mountinfo's text (proc(5): "36 35 98:0 /mnt1 /mnt2 rw,noatime
// master:1 - ext3 /dev/root rw,errors=continue"); every mount of one superblock has them.
func mountinfoSuperOptions(b []byte, major, minor uint32, fstype string) (string, error) {
	dev := fmt.Sprintf("%d:%d", major, minor)
	for line := range strings.Lines(string(b)) {
		pre, post, ok := strings.Cut(strings.TrimSuffix(line, "\n"), " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if ok && len(f) >= 3 && f[2] == dev && len(g) >= 3 && g[0] == fstype {
			return g[2], nil
		}
	}
	return "", fmt.Errorf("no %s mount of device %s in /proc/self/mountinfo", fstype, dev)
}

// MediumOf is the medium of the filesystem holding dir: Memory for a tmpfs (a kubelet root
// dir or a snapshotter root on one puts disk emptyDirs or writable layers in memory), else Disk.
func MediumOf(dir string) (Medium, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return Disk, fmt.Errorf("statfs %s: %w", dir, err)
	}
	if st.Type == unix.TMPFS_MAGIC {
		return Memory, nil
	}
	return Disk, nil
}
