package exporter

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// readDirBatch bounds how many directory entries are held at once, so that memory
// stays flat however many files a folder holds.
const readDirBatch = 512

// DiskUsage is what a walk of one folder found, with du semantics.
type DiskUsage struct {
	// UsedBytes counts allocated blocks (st_blocks*512), so sparse files count what
	// they really occupy, as `du -s -B1` does.
	UsedBytes int64
	// Inodes counts files, folders and links, each hard-linked inode once.
	Inodes int64
	// Unreadable counts entries the walk could not read; above zero, UsedBytes is a
	// lower bound.
	Unreadable int64
}

type inodeKey struct{ dev, ino uint64 }

// walker holds the state of one walk. Its memory grows only with the number of
// hard-linked inodes (they must be remembered to be counted once) and with the
// depth of the tree, never with the number of plain files.
type walker struct {
	ctx     context.Context
	rootDev uint64
	sem     chan struct{}
	wg      sync.WaitGroup

	used, inodes, unreadable atomic.Int64

	linksMu sync.Mutex
	links   map[inodeKey]struct{}
}

// MeasureDiskUsage walks root like `du -s -B1 -x`: it does not follow symbolic
// links, does not cross into other filesystems, counts each hard-linked inode once
// and tolerates entries that vanish during the walk. Up to concurrency folders are
// read at once. An error is returned only when root itself cannot be measured;
// unreadable entries below it are counted in DiskUsage.Unreadable.
func MeasureDiskUsage(ctx context.Context, root string, concurrency int) (DiskUsage, error) {
	var st unix.Stat_t
	if err := unix.Lstat(root, &st); err != nil {
		return DiskUsage{}, &fs.PathError{Op: "lstat", Path: root, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return DiskUsage{}, fmt.Errorf("%s: not a directory", root)
	}
	if concurrency < 1 {
		concurrency = 1
	}
	w := &walker{
		ctx:     ctx,
		rootDev: st.Dev,
		sem:     make(chan struct{}, concurrency-1),
		links:   map[inodeKey]struct{}{},
	}
	w.used.Add(st.Blocks * 512)
	w.inodes.Add(1)
	if err := w.dir(root, true); err != nil {
		w.wg.Wait()
		return DiskUsage{}, err
	}
	w.wg.Wait()
	if err := ctx.Err(); err != nil {
		return DiskUsage{}, fmt.Errorf("measuring %s: %w", root, err)
	}
	return DiskUsage{UsedBytes: w.used.Load(), Inodes: w.inodes.Load(), Unreadable: w.unreadable.Load()}, nil
}

// dir accounts for the entries of one folder and descends into its subfolders,
// handing a subfolder to a new goroutine when a slot is free and walking it inline
// otherwise, which bounds both goroutines and stack depth.
func (w *walker) dir(path string, isRoot bool) error {
	if w.ctx.Err() != nil {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		if isRoot {
			return fmt.Errorf("opening %s: %w", path, err)
		}
		w.noteError(err)
		return nil
	}

	var used, inodes int64
	var subdirs []string
	dirfd := int(f.Fd())
	for {
		// Names only, and fstatat relative to the open folder: no per-file path
		// strings or DirEntry values, and no race with a rename of a parent.
		names, err := f.Readdirnames(readDirBatch)
		for _, name := range names {
			var st unix.Stat_t
			if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				w.noteError(err)
				continue
			}
			if st.Dev != w.rootDev {
				continue // a mount point: another filesystem's usage is not ours
			}
			if st.Mode&unix.S_IFMT == unix.S_IFDIR {
				used += st.Blocks * 512
				inodes++
				subdirs = append(subdirs, filepath.Join(path, name))
				continue
			}
			if st.Nlink > 1 && !w.firstSight(inodeKey{dev: st.Dev, ino: st.Ino}) {
				continue
			}
			used += st.Blocks * 512
			inodes++
		}
		if errors.Is(err, io.EOF) || (err == nil && len(names) == 0) {
			break
		}
		if err != nil {
			w.noteError(err)
			break
		}
	}
	w.used.Add(used)
	w.inodes.Add(inodes)
	f.Close()

	for _, sub := range subdirs {
		select {
		case w.sem <- struct{}{}:
			w.wg.Add(1)
			go func(p string) {
				defer func() { <-w.sem; w.wg.Done() }()
				_ = w.dir(p, false)
			}(sub)
		default:
			_ = w.dir(sub, false)
		}
	}
	return nil
}

// firstSight reports whether a hard-linked inode is seen for the first time.
func (w *walker) firstSight(k inodeKey) bool {
	w.linksMu.Lock()
	defer w.linksMu.Unlock()
	if _, seen := w.links[k]; seen {
		return false
	}
	w.links[k] = struct{}{}
	return true
}

// noteError counts an entry the walk could not read. Entries that vanished between
// the listing and the lstat are simply gone: nothing of them is left to count.
func (w *walker) noteError(err error) {
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	w.unreadable.Add(1)
}
