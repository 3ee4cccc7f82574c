package exporter

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// dirFlags open a folder the walk listed without trusting that it is still that
// folder: O_NOFOLLOW refuses a symbolic link swapped in for it (ELOOP), and
// O_DIRECTORY|O_NONBLOCK fail at once (ENOTDIR) on a FIFO or device swapped in,
// where a plain open would block forever.
const dirFlags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC

// direntBufSize is the getdents buffer of one walking goroutine, as os.File uses:
// memory stays flat however many entries a folder holds.
const direntBufSize = 8 << 10

// heldDirs bounds the folder fds one walking goroutine keeps open on its way down.
// Deeper folders close their ancestors' fds and re-open them through ".." on the way
// back up, so a tree of any depth needs at most concurrency*(heldDirs+2) fds.
const heldDirs = 16

// maxRememberedLinks bounds the hard-linked inodes one walk remembers to count each
// once (about 5 MiB). The tenant decides how many there are; past the bound, further
// hard links are counted at every sighting: an over-count, never an under-count.
// A variable so that tests can lower it.
var maxRememberedLinks = 1 << 17

// testHookBeforeOpen, when set by a test, runs between the fstatat that saw name as
// a folder and the openat of name: the window in which a tenant can swap it.
var testHookBeforeOpen func(name string)

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
	// UncheckedLinks counts hard links counted without checking whether their inode
	// was counted already, because the walk remembered maxRememberedLinks inodes;
	// above zero, UsedBytes and Inodes may be over (never under).
	UncheckedLinks int64
}

type inodeKey struct{ dev, ino uint64 }

// errChanged says that the entry at a name is no longer the folder the walk listed.
var errChanged = errors.New("entry changed during the walk")

// walker holds the state of one walk. Its memory grows with the hard-linked inodes
// (up to maxRememberedLinks) and with the depth of the tree, never with the number
// of plain files; its open fds are bounded by concurrency and heldDirs.
type walker struct {
	ctx     context.Context
	rootDev uint64
	sem     chan struct{}
	wg      sync.WaitGroup
	bufs    sync.Pool

	used, inodes, unreadable, unchecked atomic.Int64

	linksMu sync.Mutex
	links   map[inodeKey]struct{}
}

// frame is one folder on a walking goroutine's way down.
type frame struct {
	fd   int // -1 while closed to bound open fds
	ino  uint64
	name string // in the parent frame, to re-open the folder from an ancestor
	// subdirs are the subfolders listed but not walked yet.
	subdirs []subdir
}

// subdir is a subfolder as its parent's listing saw it; the walk enters it only if
// the folder it opens by that name is still this inode.
type subdir struct {
	name string
	ino  uint64
}

// MeasureDiskUsage walks root like `du -s -B1 -x`: it does not follow symbolic
// links, does not cross into other filesystems, counts each hard-linked inode once
// and tolerates entries that vanish during the walk. Up to concurrency folders are
// read at once.
//
// The tenant owning the volume controls its content and may change it during the
// walk, so every folder is opened relative to its parent's fd, never by path (no
// PATH_MAX limit, no symbolic link followed), with dirFlags, and entered only if it
// is still the inode the parent's listing saw. A folder replaced by something else
// after its listing is not entered: its own inode was counted as listed, and what
// replaced it is new, as any entry created during a walk is.
//
// An error is returned only when root itself cannot be measured; unreadable
// entries below it are counted in DiskUsage.Unreadable.
func MeasureDiskUsage(ctx context.Context, root string, concurrency int) (DiskUsage, error) {
	fd, err := ignoringEINTR(func() (int, error) { return unix.Open(root, dirFlags, 0) })
	if err != nil {
		return DiskUsage{}, &fs.PathError{Op: "open", Path: root, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return DiskUsage{}, &fs.PathError{Op: "fstat", Path: root, Err: err}
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
	w.bufs.New = func() any { b := make([]byte, direntBufSize); return &b }
	w.used.Add(st.Blocks * 512)
	w.inodes.Add(1)
	w.walkFrom(fd, st.Ino)
	w.wg.Wait()
	if err := ctx.Err(); err != nil {
		return DiskUsage{}, fmt.Errorf("measuring %s: %w", root, err)
	}
	return DiskUsage{UsedBytes: w.used.Load(), Inodes: w.inodes.Load(),
		Unreadable: w.unreadable.Load(), UncheckedLinks: w.unchecked.Load()}, nil
}

// walkFrom walks the tree below the open folder fd, depth first, and closes fd. A
// subfolder goes to a new goroutine when a slot is free and is walked by this one
// otherwise, which bounds goroutines; the explicit stack bounds the Go stack.
func (w *walker) walkFrom(fd int, ino uint64) {
	bufp := w.bufs.Get().(*[]byte)
	defer w.bufs.Put(bufp)
	stack := []frame{{fd: fd, ino: ino, subdirs: w.list(fd, *bufp)}}
	defer func() {
		for _, f := range stack {
			closeFD(f.fd)
		}
	}()
	for len(stack) > 0 && w.ctx.Err() == nil {
		top := &stack[len(stack)-1]
		if len(top.subdirs) == 0 {
			done := *top
			stack = stack[:len(stack)-1]
			if len(stack) > 0 && stack[len(stack)-1].fd < 0 {
				w.reopen(stack, done.fd)
			}
			closeFD(done.fd)
			continue
		}
		sub := top.subdirs[len(top.subdirs)-1]
		top.subdirs = top.subdirs[:len(top.subdirs)-1]
		child, ok := w.enter(top.fd, sub)
		if !ok {
			continue
		}
		select {
		case w.sem <- struct{}{}:
			w.wg.Add(1)
			go func() {
				defer func() { <-w.sem; w.wg.Done() }()
				w.walkFrom(child, sub.ino)
			}()
		default:
			stack = append(stack, frame{fd: child, ino: sub.ino, name: sub.name, subdirs: w.list(child, *bufp)})
			// Keep the fds of the last heldDirs folders and of the first, which
			// anchors re-opening when ".." is not the folder it was.
			if i := len(stack) - 1 - heldDirs; i > 0 {
				closeFD(stack[i].fd)
				stack[i].fd = -1
			}
		}
	}
}

// list accounts for the entries of the open folder fd and returns its subfolders.
// Entries are read in getdents batches and stat'ed relative to fd: no per-file path
// strings, and no race with a rename of a parent.
func (w *walker) list(fd int, buf []byte) []subdir {
	var used, inodes int64
	var subdirs []subdir
	var names []string
	for w.ctx.Err() == nil {
		n, err := ignoringEINTR(func() (int, error) { return unix.ReadDirent(fd, buf) })
		if err != nil {
			w.noteError(err)
			break
		}
		if n <= 0 {
			break
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names[:0])
		for _, name := range names {
			var st unix.Stat_t
			if _, err := ignoringEINTR(func() (int, error) {
				return 0, unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
			}); err != nil {
				w.noteError(err)
				continue
			}
			if st.Dev != w.rootDev {
				continue // a mount point: another filesystem's usage is not ours
			}
			if st.Mode&unix.S_IFMT == unix.S_IFDIR {
				used += st.Blocks * 512
				inodes++
				subdirs = append(subdirs, subdir{name: name, ino: st.Ino})
				continue
			}
			if st.Nlink > 1 && !w.firstSight(inodeKey{dev: st.Dev, ino: st.Ino}) {
				continue
			}
			used += st.Blocks * 512
			inodes++
		}
	}
	w.used.Add(used)
	w.inodes.Add(inodes)
	return subdirs
}

// enter opens the subfolder sub of the open folder parent. It returns false when
// the subfolder cannot be walked: it vanished or changed (neither is an error: what
// the listing saw is counted) or it cannot be read (counted as unreadable).
func (w *walker) enter(parent int, sub subdir) (int, bool) {
	if testHookBeforeOpen != nil {
		testHookBeforeOpen(sub.name)
	}
	fd, err := w.openVerified(parent, sub.name, sub.ino)
	if err != nil {
		w.noteError(err)
		return -1, false
	}
	return fd, true
}

// openVerified opens the folder name relative to the open folder parent and
// checks that it is the inode ino of the walked filesystem.
func (w *walker) openVerified(parent int, name string, ino uint64) (int, error) {
	fd, err := ignoringEINTR(func() (int, error) { return unix.Openat(parent, name, dirFlags, 0) })
	switch {
	case errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.ELOOP):
		return -1, errChanged // a file, FIFO, device or symbolic link took its place
	case err != nil:
		return -1, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if st.Dev != w.rootDev || st.Ino != ino {
		unix.Close(fd)
		return -1, errChanged // another folder, or a mount, took its place
	}
	return fd, nil
}

// reopen re-opens the fd of the top frame of stack, closed to bound open fds, on
// the way back up from its subfolder child (an open fd, or -1). ".." of the child
// is the folder unless the child was moved meanwhile; then the folder is opened
// again by name from its nearest open ancestor. If that fails too, the folder
// moved: its subfolders not walked yet are counted as unreadable.
func (w *walker) reopen(stack []frame, child int) {
	top := &stack[len(stack)-1]
	if child >= 0 {
		if fd, err := w.openVerified(child, "..", top.ino); err == nil {
			top.fd = fd
			return
		}
	}
	anchor := len(stack) - 2
	for stack[anchor].fd < 0 { // the first frame is always open
		anchor--
	}
	fd := stack[anchor].fd
	for i := anchor + 1; i < len(stack); i++ {
		next, err := w.openVerified(fd, stack[i].name, stack[i].ino)
		if fd != stack[anchor].fd {
			closeFD(fd)
		}
		if err != nil {
			w.unreadable.Add(int64(len(top.subdirs)))
			top.subdirs = nil
			return
		}
		fd = next
	}
	top.fd = fd
}

// firstSight reports whether a hard-linked inode is seen for the first time. Once
// maxRememberedLinks inodes are remembered, an inode not among them counts as new.
func (w *walker) firstSight(k inodeKey) bool {
	w.linksMu.Lock()
	defer w.linksMu.Unlock()
	if _, seen := w.links[k]; seen {
		return false
	}
	if len(w.links) >= maxRememberedLinks {
		w.unchecked.Add(1)
		return true
	}
	w.links[k] = struct{}{}
	return true
}

// noteError counts an entry the walk could not read. Entries that vanished or
// changed between the listing and the open are not unreadable: what the listing
// saw is counted, and nothing else is left of them to count.
func (w *walker) noteError(err error) {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, errChanged) {
		return
	}
	w.unreadable.Add(1)
}

func closeFD(fd int) {
	if fd >= 0 {
		unix.Close(fd)
	}
}

// ignoringEINTR retries a system call interrupted by a signal, as package os does.
func ignoringEINTR(call func() (int, error)) (int, error) {
	for {
		n, err := call()
		if !errors.Is(err, unix.EINTR) {
			return n, err
		}
	}
}
