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
