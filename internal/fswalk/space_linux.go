package fswalk

import (
	"io/fs"

	"golang.org/x/sys/unix"
)

// FilesystemSpace is the size and free space (for unprivileged users) of the filesystem
// holding dir.
func FilesystemSpace(dir string) (Space, error) {
	var sfs unix.Statfs_t
	if err := unix.Statfs(dir, &sfs); err != nil {
		return Space{}, &fs.PathError{Op: "statfs", Path: dir, Err: err}
	}
	return Space{CapacityBytes: int64(sfs.Blocks) * sfs.Bsize, AvailableBytes: int64(sfs.Bavail) * sfs.Bsize}, nil
}

// Device is the device number of the filesystem path is on (followed if a link): two paths
// are on one filesystem when their devices are equal.
func Device(path string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	return st.Dev, nil
}
