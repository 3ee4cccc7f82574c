package fswalk

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// FilesUsage adds up the files directly in dir, each one's allocated blocks, directories and
// what they hold left out: how the kubelet counts a pod's and a container's log files
// (fileMetricsByDir in pkg/kubelet/stats/host_stats_provider.go). Symbolic links count as
// themselves, never followed. A file gone between the listing and its stat is no error.
func FilesUsage(dir string) (DiskUsage, error) {
	f, err := os.OpenFile(dir, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return DiskUsage{}, err
	}
	defer f.Close()
	var du DiskUsage
	for {
		entries, err := f.ReadDir(256)
		for _, e := range entries {
			if e.IsDir() {
				continue
			}
			one, err := statAt(int(f.Fd()), dir, e.Name())
			switch {
			case errors.Is(err, fs.ErrNotExist):
			case err != nil:
				du.Unreadable++
			case one.Mode&unix.S_IFMT != unix.S_IFDIR:
				du.UsedBytes += one.Blocks * 512
				du.Inodes++
			}
		}
		if errors.Is(err, io.EOF) || (err == nil && len(entries) == 0) {
			return du, nil
		}
		if err != nil {
			return du, &fs.PathError{Op: "readdir", Path: dir, Err: err}
		}
	}
}

// FileUsage is the allocated blocks of the one file name in dir (not followed if a link).
func FileUsage(dir, name string) (DiskUsage, error) {
	f, err := os.OpenFile(dir, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return DiskUsage{}, err
	}
	defer f.Close()
	st, err := statAt(int(f.Fd()), dir, name)
	if err != nil {
		return DiskUsage{}, err
	}
	return DiskUsage{UsedBytes: st.Blocks * 512, Inodes: 1}, nil
}

func statAt(dirfd int, dir, name string) (unix.Stat_t, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return st, &fs.PathError{Op: "stat", Path: dir + "/" + name, Err: err}
	}
	return st, nil
}

// OwnTmpfsUsage measures the tmpfs mounted at dir, as the kubelet mounts one per medium: Memory
// volume; ok is false when dir is no tmpfs of its own (a walk must measure it then). Its bytes
// are the blocks the tmpfs holds (statfs: all of them are the volume's, a file deleted but held
// open included) plus the user.* extended attributes a walk of it finds (DiskUsage.XattrBytes):
// kernel memory outside any block, which statfs does not count; what the walk found is kept in
// NamedBytes. Its inodes and flags are the
// walk's, as du counts them: statfs counts every hard link as an inode, and from Linux 6.6 one
// more per KiB of attributes. A walk cut short returns what it counted, CutShort, with the error.
func OwnTmpfsUsage(ctx context.Context, dir string, opts Options) (du DiskUsage, ok bool, err error) {
	var sfs unix.Statfs_t
	if err := unix.Statfs(dir, &sfs); err != nil {
		return DiskUsage{}, false, &fs.PathError{Op: "statfs", Path: dir, Err: err}
	}
	if sfs.Type != unix.TMPFS_MAGIC {
		return DiskUsage{}, false, nil
	}
	var self, parent unix.Stat_t
	if err := unix.Lstat(dir, &self); err != nil {
		return DiskUsage{}, false, &fs.PathError{Op: "lstat", Path: dir, Err: err}
	}
	if err := unix.Lstat(dir+"/..", &parent); err != nil {
		return DiskUsage{}, false, &fs.PathError{Op: "lstat", Path: dir + "/..", Err: err}
	}
	if self.Dev == parent.Dev {
		return DiskUsage{}, false, nil // a directory of a larger tmpfs, shared with others
	}
	du, err = MeasureDiskUsage(ctx, dir, opts)
	if err != nil && !du.CutShort {
		return DiskUsage{}, true, err
	}
	du.NamedBytes, du.UsedBytes = du.UsedBytes, int64(sfs.Blocks-sfs.Bfree)*sfs.Bsize+du.XattrBytes
	return du, true, err
}
