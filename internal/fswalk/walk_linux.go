package fswalk

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// dirFlags open a directory the walk listed without trusting that it is still that
// directory: O_NOFOLLOW refuses a symbolic link swapped in for it (ELOOP), and
// O_DIRECTORY|O_NONBLOCK fail at once (ENOTDIR) on a FIFO or device swapped in,
// where a plain open would block forever.
const dirFlags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC

// direntBufSize is the getdents64 buffer of one walking goroutine: large enough
// that a directory of thousands of entries is read in a few calls, small enough that
// memory stays flat however many entries a directory holds.
const direntBufSize = 32 << 10

// statxMask asks only for what the walk uses (the device is always filled in); a directory's
// ctime tells whether it changed during the walk.
const statxMask = unix.STATX_TYPE | unix.STATX_INO | unix.STATX_NLINK | unix.STATX_BLOCKS | unix.STATX_CTIME

// statxFlags measure an entry as it is: never through a symbolic link, never
// triggering an automount.
const statxFlags = unix.AT_SYMLINK_NOFOLLOW | unix.AT_NO_AUTOMOUNT

// heldDirs bounds the directory fds one walking goroutine keeps open on its way down.
// Deeper directories close their ancestors' fds and re-open them through ".." on the way
// back up, so a tree of any depth needs at most Options.Concurrency*(heldDirs+2) fds.
const heldDirs = 16

// pendingBudget bounds, for the whole walk, the memory held by subdirectories listed but not
// walked yet (their entries and names, as allocated): the tenant decides how wide and how deep
// its directories are, and a bound per directory let every directory on the way down keep its share
// (~1.2 MiB a level, issue 30). A listing pauses once it would hold more than half of what the
// rest of the walk leaves, so the directories below it have room too; the walk goes down into what
// it has and reads on once that is walked. A variable so that tests can lower it.
var pendingBudget int64 = 256 << 10

// minListRead is the smallest getdents64 read (the longest entry takes 280 bytes). A directory
// holding no pending subdirectory reads at least this much whatever the budget says, so the
// deepest directory of every walking goroutine always goes on: nothing waits for the budget, and
// a level of depth costs its frame and one such read at most.
const minListRead = 512

// keptFrameMemory bounds the buffers a finished frame keeps for the next directory at its depth
// (outside the budget), and maxPooledFrames the frames a walking goroutine's state keeps for
// the next walk, so that neither a wide directory nor a deep one pins memory once walked.
const (
	keptFrameMemory = 1 << 10
	maxPooledFrames = 64
)

// maxRememberedLinks bounds the hard-linked inodes one walk remembers to count each
// once (about 3 MiB). The tenant decides how many there are; past the bound, further
// hard links are counted at every sighting: an over-count, never an under-count.
// A variable so that tests can lower it.
var maxRememberedLinks = 1 << 17

// testHookBeforeOpen, when set by a test, runs between the listing that saw name as
// a directory and the openat of name: the window in which a tenant can swap it.
var testHookBeforeOpen func(name string)

// NUL-terminated names for the system calls, which take C strings.
var (
	emptyPath = []byte{0}
	dotDot    = []byte("..\x00")
)

// devID is a device as statx reports it.
type devID struct{ major, minor uint32 }

func devOf(stx *unix.Statx_t) devID { return devID{stx.Dev_major, stx.Dev_minor} }

// errChanged says that the entry at a name is no longer the directory the walk listed.
var errChanged = errors.New("entry changed during the walk")

// walker holds the state of one walk. Its memory grows with the hard-linked inodes
// (up to maxRememberedLinks) and by a frame and one smallest read per level of depth, never
// with the number of files or subdirectories of a directory (pendingBudget, for the whole walk); its
// open fds are bounded by Options.Concurrency and heldDirs.
type walker struct {
	ctx context.Context
	// start is when the walk began, by the clock the kernel stamps ctimes with: a directory
	// whose ctime is not before it changed during the walk.
	start unix.Timespec
	// meter, when the walk is metered, receives the CPU time of its goroutines' threads.
	meter   Meter
	rootDev devID
	// direntInodes: the root's filesystem lists each entry with its type and real inode
	// number (direntsExact), so a listed directory needs no statx before it is opened.
	direntInodes bool
	// xattrs: the root's filesystem is a tmpfs, whose extended attributes take kernel memory
	// outside any block (entryXattrs).
	xattrs bool
	sem    chan struct{}
	wg     sync.WaitGroup

	used, inodes, unreadable, unchecked, changed atomic.Int64
	// xattrUsed is the part of used that is user.* extended attributes.
	xattrUsed atomic.Int64
	// pending is the memory the walk's listed subdirectories not walked yet hold (pendingBudget).
	pending atomic.Int64

	linksMu sync.Mutex
	// links holds inode numbers: every counted entry is on the root's filesystem.
	links map[uint64]struct{}
}

// walkState is what one walking goroutine reuses from directory to directory, and from
// one walk to the next, so that walking allocates nothing per entry.
type walkState struct {
	buf   []byte  // getdents64 records
	stack []frame // frames past the top keep their buffers for reuse
}

var walkStates = sync.Pool{New: func() any { return &walkState{buf: make([]byte, direntBufSize)} }}

// batch is one getdents64 batch of a large directory, measured by a helper goroutine.
type batch struct {
	recs []byte
	subdirectories
}

func (b *batch) reset() { b.recs, b.names, b.subdirs = b.recs[:0], b.names[:0], b.subdirs[:0] }

var batches = sync.Pool{New: func() any { return &batch{recs: make([]byte, 0, direntBufSize)} }}

// frame is one directory on a walking goroutine's way down.
type frame struct {
	fd  int // -1 while closed to bound open fds
	ino uint64
	// name is the directory's NUL-terminated name in its parent frame's names, to
	// re-open it from an ancestor; nil for the first frame, which is never closed.
	name []byte
	// the subdirectories listed but not walked yet
	subdirectories
	// charged: the memory of subdirectories counted in walker.pending
	charged int64
	// more: the listing paused (pendingBudget) before the directory's end; it reads on at pos
	// when fd had to be closed meanwhile.
	more bool
	pos  int64
}

// subdirectories are subdirectories listed but not walked yet, their names in names.
type subdirectories struct {
	subdirs []subdir
	names   []byte
}

// addName appends the subdirectory name (NUL-terminated, then padding) of inode ino.
func (s *subdirectories) addName(name []byte, ino uint64, uncounted bool) {
	from := len(s.names)
	s.names = append(s.names, name[:bytes.IndexByte(name, 0)+1]...)
	s.subdirs = append(s.subdirs, subdir{ino: ino, from: from, to: len(s.names), uncounted: uncounted})
}

// add appends the subdirectories of o.
func (s *subdirectories) add(o *subdirectories) {
	for _, sub := range o.subdirs {
		from := len(s.names)
		s.names = append(s.names, o.names[sub.from:sub.to]...)
		s.subdirs = append(s.subdirs, subdir{ino: sub.ino, from: from, to: len(s.names), uncounted: sub.uncounted})
	}
}

// memory is what s holds allocated, its charge to pendingBudget.
func (s *subdirectories) memory() int64 {
	return int64(cap(s.subdirs))*int64(unsafe.Sizeof(subdir{})) + int64(cap(s.names))
}

// recharge brings what s is charged to the walk's budget, *charged, to what it holds now.
func (w *walker) recharge(s *subdirectories, charged *int64) {
	if m := s.memory(); m != *charged {
		w.pending.Add(m - *charged)
		*charged = m
	}
}

// release ends f's charge to the walk's budget as it leaves the stack, and frees its buffers
// unless they are small enough to keep for the next directory at its depth.
func (w *walker) release(f *frame) {
	w.pending.Add(-f.charged)
	f.charged = 0
	if f.memory() > keptFrameMemory {
		f.names, f.subdirs = nil, nil
	}
}

// subdir is a subdirectory as its parent's listing saw it; the walk enters it only if
// the directory it opens by that name is still this inode.
type subdir struct {
	ino      uint64
	from, to int // its name in subdirectories.names, the terminating NUL included
	// uncounted: listed from getdents64 alone (walker.direntInodes); its own blocks and
	// inode are counted when it is opened, or by a statx of its name if that fails.
	uncounted bool
}

// MeasureDiskUsage walks root like `du -s -B1 -x`: no symbolic link followed, no other
// filesystem entered, each hard-linked inode counted once, vanished entries tolerated. Up to
// opts.Concurrency directories are read at once; with opts.Meter each walking goroutine charges
// its thread's CPU time to it. The tenant controls the content, so every directory is opened
// relative to its parent's fd with dirFlags and entered only if it is still the inode listed.
// Data moved during the walk from an unread directory to a read one is caught by walking again
// (up to opts.Retries) while a directory changed (DiskUsage.Changed), else the result is a lower
// bound. An error means root itself could not be measured (unreadable entries below it are
// counted in DiskUsage.Unreadable); when ctx ends first, it returns what it counted, CutShort,
// with an error wrapping ctx.Err().
func MeasureDiskUsage(ctx context.Context, root string, opts Options) (DiskUsage, error) {
	du, err := walkOnce(ctx, root, opts)
	for try := 0; try < opts.Retries && err == nil && du.Changed > 0; try++ {
		// Past every ctime the last walk may have seen: a change made just before a walk
		// starts may count as changed during it (awaitNextTick).
		awaitNextTick(ctx)
		again, err := walkOnce(ctx, root, opts)
		if err != nil {
			break // the finished walk's lower bound stands
		}
		// Two lower bounds: the larger is the better one.
		if again.Changed == 0 || again.UsedBytes > du.UsedBytes {
			du = again
		}
	}
	return du, err
}

// awaitNextTick returns once the coarse clock, which a walk's start is read from, has moved
// past the fine clock's reading now, or ctx has ended: then every change made before now
// has a ctime before the next walk's start. The kernel stamps a ctime by the coarse clock,
// or, where the file's timestamps were queried (multigrain timestamps, Linux 6.13), by the
// fine one, up to a few ticks ahead of the coarse clock; and on a busy or virtual machine a
// tick may come late. So sleeping one tick is not enough.
func awaitNextTick(ctx context.Context) {
	var now, tick unix.Timespec
	if unix.ClockGettime(unix.CLOCK_REALTIME, &now) != nil || unix.ClockGetres(unix.CLOCK_REALTIME_COARSE, &tick) != nil {
		return
	}
	t := time.NewTimer(0)
	defer t.Stop()
	for range 100 { // 100 ticks at most: 0.4 s at HZ=250
		t.Reset(time.Duration(tick.Nano()))
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var coarse unix.Timespec
		if unix.ClockGettime(unix.CLOCK_REALTIME_COARSE, &coarse) != nil || coarse.Nano() > now.Nano() {
			return
		}
	}
}

// walkOnce is one walk of MeasureDiskUsage.
func walkOnce(ctx context.Context, root string, opts Options) (DiskUsage, error) {
	var start unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_REALTIME_COARSE, &start); err != nil {
		return DiskUsage{}, fmt.Errorf("reading the clock: %w", err)
	}
	fd, err := ignoringEINTR(func() (int, error) { return unix.Open(root, dirFlags, 0) })
	if err != nil {
		return DiskUsage{}, &fs.PathError{Op: "open", Path: root, Err: err}
	}
	var stx unix.Statx_t
	if err := statx(fd, emptyPath, unix.AT_EMPTY_PATH, &stx); err != nil {
		unix.Close(fd)
		return DiskUsage{}, &fs.PathError{Op: "statx", Path: root, Err: err}
	}
	concurrency := max(opts.Concurrency, 1)
	var sfs unix.Statfs_t
	if err := unix.Fstatfs(fd, &sfs); err != nil {
		unix.Close(fd)
		return DiskUsage{}, &fs.PathError{Op: "statfs", Path: root, Err: err}
	}
	w := &walker{
		direntInodes: direntsExact(sfs.Type),
		xattrs:       uint32(sfs.Type) == unix.TMPFS_MAGIC,
		ctx:          ctx,
		start:        start,
		meter:        opts.Meter,
		rootDev:      devOf(&stx),
		sem:          make(chan struct{}, concurrency-1),
		links:        map[uint64]struct{}{},
	}
	w.used.Add(int64(stx.Blocks)*512 + w.directoryXattrs(fd))
	w.inodes.Add(1)
	w.walkFrom(fd, stx.Ino)
	w.wg.Wait()
	du := DiskUsage{UsedBytes: w.used.Load(), XattrBytes: w.xattrUsed.Load(), Inodes: w.inodes.Load(),
		Unreadable: w.unreadable.Load(), UncheckedLinks: w.unchecked.Load(), Changed: w.changed.Load()}
	if err := ctx.Err(); err != nil {
		du.CutShort = true
		return du, fmt.Errorf("measuring %s: cut short after counting %d bytes: %w", root, du.UsedBytes, err)
	}
	return du, nil
}

// walkFrom walks the tree below the open directory fd, depth first, and closes fd. A
// subdirectory goes to a new goroutine when a slot is free and is walked by this one
// otherwise, which bounds goroutines; the explicit stack bounds the Go stack. Each call is
// one goroutine's whole share of the walk, metered as one.
func (w *walker) walkFrom(fd int, ino uint64) {
	tm := startThreadMeter(w.meter)
	defer tm.stop()
	st := walkStates.Get().(*walkState)
	stack := pushFrame(st.stack[:0], fd, ino, nil)
	defer func() {
		for i := range stack {
			closeFD(stack[i].fd)
			stack[i].fd = -1
			w.release(&stack[i])
		}
		st.stack = stack[:0]
		if cap(st.stack) > maxPooledFrames {
			st.stack = nil
		}
		walkStates.Put(st)
	}()
	w.list(&stack[0], st.buf)
	for len(stack) > 0 && w.ctx.Err() == nil {
		tm.tick()
		top := &stack[len(stack)-1]
		if len(top.subdirs) == 0 && top.more {
			top.names = top.names[:0] // no frame above it holds a name of them any more
			w.list(top, st.buf)       // reads on where it paused
			continue
		}
		if len(top.subdirs) == 0 {
			done := top.fd
			top.fd = -1
			w.release(top)
			stack = stack[:len(stack)-1]
			if len(stack) > 0 && stack[len(stack)-1].fd < 0 {
				w.reopen(stack, done)
			}
			closeFD(done)
			continue
		}
		sub := top.subdirs[len(top.subdirs)-1]
		top.subdirs = top.subdirs[:len(top.subdirs)-1]
		name := top.names[sub.from:sub.to]
		child, ok := w.enter(top.fd, name, sub)
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
			stack = pushFrame(stack, child, sub.ino, name)
			w.list(&stack[len(stack)-1], st.buf)
			// Keep the fds of the last heldDirs directories and of the first, which
			// anchors re-opening when ".." is not the directory it was.
			if i := len(stack) - 1 - heldDirs; i > 0 {
				w.park(&stack[i])
			}
		}
	}
}

// pushFrame pushes the directory fd onto stack, reusing the buffers of a frame popped
// earlier (keptFrameMemory). name stays valid: it lies in the parent frame's names, which
// do not change while the parent has frames above it.
func pushFrame(stack []frame, fd int, ino uint64, name []byte) []frame {
	if len(stack) < cap(stack) {
		stack = stack[:len(stack)+1]
	} else {
		stack = append(stack, frame{})
	}
	f := &stack[len(stack)-1]
	f.fd, f.ino, f.name, f.more, f.pos, f.charged = fd, ino, name, false, 0, 0
	f.subdirs, f.names = f.subdirs[:0], f.names[:0]
	return stack
}

// list accounts for the entries of the directory of f and records its subdirectories in
// f, from where its fd stands. Entries are read in getdents64 batches, as large as the
// walk's budget leaves room for (listRead); once it leaves none, the listing pauses (f.more)
// until the subdirectories f holds are walked. A directory larger than one batch is measured in
// parallel: while a walking slot is free, the next full batch goes to a helper goroutine, so
// that one huge directory is not walked by one core. At the directory's end, a directory changed since
// the walk started counts as changed: what left it may have gone where the walk has read already.
func (w *walker) list(f *frame, buf []byte) {
	var (
		helpers      sync.WaitGroup
		mu           sync.Mutex
		found        subdirectories // what the helpers found, added to f at the end
		foundCharged int64
	)
	w.recharge(&f.subdirectories, &f.charged)
	f.more = true
	for read := 0; w.ctx.Err() == nil; read++ {
		mu.Lock()
		size := w.listRead(len(f.subdirs)+len(found.subdirs), f.charged+foundCharged, len(buf))
		mu.Unlock()
		if size == 0 {
			break
		}
		n, err := ignoringEINTR(func() (int, error) { return unix.Getdents(f.fd, buf[:size]) })
		if err != nil {
			w.noteError(err)
			f.more = false
			break
		}
		if n <= 0 {
			f.more = false
			w.checkUnchanged(f.fd)
			break
		}
		if read > 0 && size == len(buf) {
			select {
			case w.sem <- struct{}{}:
				b := batches.Get().(*batch)
				b.recs = append(b.recs[:0], buf[:n]...)
				helpers.Add(1)
				go func() {
					defer func() { <-w.sem; helpers.Done() }()
					tm := startThreadMeter(w.meter)
					w.measure(f.fd, b.recs, &b.subdirectories)
					tm.stop()
					if len(b.subdirs) > 0 {
						mu.Lock()
						found.add(&b.subdirectories)
						w.recharge(&found, &foundCharged)
						mu.Unlock()
					}
					b.reset()
					batches.Put(b)
				}()
				continue
			default:
			}
		}
		w.measure(f.fd, buf[:n], &f.subdirectories)
		w.recharge(&f.subdirectories, &f.charged)
	}
	helpers.Wait()
	f.add(&found)
	w.recharge(&f.subdirectories, &f.charged)
	w.pending.Add(-foundCharged)
}

// listRead is how many bytes of getdents64 records a listing reads next, holding pending
// subdirectories charged own, or 0 when it pauses. It may take at most half of what the rest of
// the walk leaves (own counts twice), so that the directories below it have room too; a listing
// holding none always reads. A subdirectory's record of r bytes costs an entry and a name (r+13
// bytes at most, from 24), as allocated up to twice that: a read of a quarter of the room fits.
func (w *walker) listRead(pending int, own int64, limit int) int {
	size := min((pendingBudget-w.pending.Load()-own)/4, int64(limit))
	if size >= minListRead {
		return int(size)
	}
	if pending > 0 {
		return 0
	}
	return minListRead
}

// checkUnchanged counts the open directory fd as changed when its ctime is not before the
// walk's start.
func (w *walker) checkUnchanged(fd int) {
	var stx unix.Statx_t
	if err := statx(fd, emptyPath, unix.AT_EMPTY_PATH, &stx); err != nil {
		w.noteError(err)
		return
	}
	if c := stx.Ctime; c.Sec > w.start.Sec || c.Sec == w.start.Sec && int64(c.Nsec) >= w.start.Nsec {
		w.changed.Add(1)
	}
}

// park closes the fd of f to bound open fds, keeping where its paused listing reads on.
func (w *walker) park(f *frame) {
	if f.fd < 0 {
		return
	}
	if f.more {
		pos, err := unix.Seek(f.fd, 0, io.SeekCurrent)
		if err != nil {
			w.lostListing(f)
		}
		f.pos = pos
	}
	closeFD(f.fd)
	f.fd = -1
}

// lostListing gives up the rest of f's paused listing: the walk misses what it holds.
func (w *walker) lostListing(f *frame) {
	if f.more {
		f.more = false
		w.changed.Add(1)
	}
}

// measure accounts for the entries of the getdents64 records recs of the open
// directory fd and adds its subdirectories to subs. Each entry is measured by statx
// relative to fd, straight from its name in recs: nothing is allocated per entry,
// and no path is resolved, so a rename of a parent cannot redirect the walk.
func (w *walker) measure(fd int, recs []byte, subs *subdirectories) {
	var used, inodes int64
	var stx unix.Statx_t
	// linux_dirent64: d_ino u64, d_off s64, d_reclen u16, d_type u8, d_name, NUL,
	// padded to 8 bytes: 24 bytes at least.
	for len(recs) >= 24 {
		reclen := int(binary.NativeEndian.Uint16(recs[16:18]))
		if reclen < 24 || reclen > len(recs) {
			break // never from the kernel; stops a bad record looping forever
		}
		ino, typ := binary.NativeEndian.Uint64(recs[0:8]), recs[18]
		name := recs[19:reclen] // NUL-terminated, then padding
		recs = recs[reclen:]
		if name[0] == '.' && (name[1] == 0 || name[1] == '.' && name[2] == 0) {
			continue
		}
		if typ == unix.DT_DIR && w.direntInodes {
			subs.addName(name, ino, true)
			continue
		}
		if err := statx(fd, name, statxFlags, &stx); err != nil {
			w.noteError(err)
			continue
		}
		if devOf(&stx) != w.rootDev {
			continue // a mount point: another filesystem's usage is not ours
		}
		if stx.Mode&unix.S_IFMT == unix.S_IFDIR {
			used += int64(stx.Blocks) * 512
			inodes++
			subs.addName(name, stx.Ino, false)
			continue
		}
		if stx.Nlink > 1 && !w.firstSight(stx.Ino) {
			continue
		}
		used += int64(stx.Blocks)*512 + w.entryXattrs(fd, name)
		inodes++
	}
	w.used.Add(used)
	w.inodes.Add(inodes)
}

// A tenant's user.* extended attributes on a tmpfs (Linux 6.6 and later) take kernel memory
// that no block count, statfs or size limit shows: megabytes on a 1Mi volume measured as
// empty. So on a tmpfs the walk adds each inode's user.* names and values to its bytes.
// Other namespaces (security.* labels) are the system's, not the tenant's.
const userXattrPrefix = "user."

// entryXattrs is the size of the user.* attributes of entry name (NUL-terminated) of the open
// directory fd on a tmpfs, else 0. There is no *at form of listxattr before Linux 6.13, so the
// entry is named through the directory's fd in /proc, without following a symbolic link.
func (w *walker) entryXattrs(fd int, name []byte) int64 {
	if !w.xattrs {
		return 0
	}
	if i := bytes.IndexByte(name, 0); i >= 0 {
		name = name[:i]
	}
	path := "/proc/self/fd/" + strconv.Itoa(fd) + "/" + string(name)
	return w.noteXattrs(xattrBytes(
		func(dest []byte) (int, error) { return unix.Llistxattr(path, dest) },
		func(attr string, dest []byte) (int, error) { return unix.Lgetxattr(path, attr, dest) }))
}

// directoryXattrs is entryXattrs for the open directory fd itself.
func (w *walker) directoryXattrs(fd int) int64 {
	if !w.xattrs {
		return 0
	}
	return w.noteXattrs(xattrBytes(
		func(dest []byte) (int, error) { return unix.Flistxattr(fd, dest) },
		func(attr string, dest []byte) (int, error) { return unix.Fgetxattr(fd, attr, dest) }))
}

// noteXattrs adds n bytes of attributes to DiskUsage.XattrBytes and returns n, which the
// caller adds to the bytes used.
func (w *walker) noteXattrs(n int64) int64 {
	if n > 0 {
		w.xattrUsed.Add(n)
	}
	return n
}

// xattrBytes adds up the user.* names and value sizes list and get report; an attribute
// that vanishes meanwhile counts nothing.
func xattrBytes(list func([]byte) (int, error), get func(string, []byte) (int, error)) int64 {
	n, err := list(nil)
	if err != nil || n == 0 {
		return 0
	}
	names := make([]byte, n)
	if n, err = list(names); err != nil {
		return 0
	}
	var total int64
	for _, attr := range bytes.Split(names[:n], []byte{0}) {
		if !bytes.HasPrefix(attr, []byte(userXattrPrefix)) {
			continue
		}
		if size, err := get(string(attr), nil); err == nil {
			total += int64(len(attr) + size)
		}
	}
	return total
}

// enter opens the subdirectory sub, named name (NUL-terminated), of the open directory
// parent. It returns false when the subdirectory cannot be walked: it vanished or changed
// (not an error: what the listing saw is counted, but the walk counts it as changed, since
// what the directory held may now be where the walk has read already) or it cannot be read
// (counted as unreadable). A subdirectory listed uncounted is counted here: from the
// directory opened when it is the one listed, else from a statx of whatever its name
// holds now, as the listing would have done (an unreadable directory's own blocks count,
// as du counts them).
func (w *walker) enter(parent int, name []byte, sub subdir) (int, bool) {
	if testHookBeforeOpen != nil {
		testHookBeforeOpen(string(name[:len(name)-1]))
	}
	var stx unix.Statx_t
	fd, err := w.openVerified(parent, name, sub.ino, &stx)
	if err != nil {
		if errors.Is(err, errChanged) || errors.Is(err, fs.ErrNotExist) {
			w.changed.Add(1)
		}
		w.noteError(err)
		if sub.uncounted {
			w.countByName(parent, name)
		}
		return -1, false
	}
	if sub.uncounted {
		w.used.Add(int64(stx.Blocks) * 512)
		w.inodes.Add(1)
	}
	w.used.Add(w.directoryXattrs(fd))
	return fd, true
}

// countByName counts the entry name (NUL-terminated) of the open directory parent as the
// listing counts a file, whatever it is now; an entry gone is not counted.
func (w *walker) countByName(parent int, name []byte) {
	var stx unix.Statx_t
	if err := statx(parent, name, statxFlags, &stx); err != nil || devOf(&stx) != w.rootDev {
		return
	}
	if stx.Mode&unix.S_IFMT != unix.S_IFDIR && stx.Nlink > 1 && !w.firstSight(stx.Ino) {
		return
	}
	w.used.Add(int64(stx.Blocks) * 512)
	w.inodes.Add(1)
}

// direntsExact reports whether a filesystem, by its statfs type, lists every entry with
// the inode number statx reports: ext4, XFS and tmpfs do, where the kubelet keeps
// emptyDirs. Elsewhere (overlayfs without xino, for one) d_ino need not be st_ino, and
// every entry is measured by a statx of its name before a directory is opened. The file
// type getdents64 gives is only a hint either way: an entry it calls a directory that
// opens as something else is counted by a statx of its name. A variable so that tests
// can walk the other way too.
var direntsExact = func(fsType int64) bool {
	switch uint32(fsType) {
	case unix.EXT4_SUPER_MAGIC, unix.XFS_SUPER_MAGIC, unix.TMPFS_MAGIC:
		return true
	}
	return false
}

// openVerified opens the directory name (NUL-terminated) relative to the open directory
// parent and checks that it is the inode ino of the walked filesystem; stx receives
// the directory's statx.
func (w *walker) openVerified(parent int, name []byte, ino uint64, stx *unix.Statx_t) (int, error) {
	fd, err := openat(parent, name, dirFlags)
	switch {
	case errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.ELOOP):
		return -1, errChanged // a file, FIFO, device or symbolic link took its place
	case err != nil:
		return -1, err
	}
	if err := statx(fd, emptyPath, unix.AT_EMPTY_PATH, stx); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if devOf(stx) != w.rootDev || stx.Ino != ino {
		unix.Close(fd)
		return -1, errChanged // another directory, or a mount, took its place
	}
	return fd, nil
}

// reopen re-opens the fd of the top frame of stack, closed to bound open fds, on
// the way back up from its subdirectory child (an open fd, or -1). ".." of the child
// is the directory unless the child was moved meanwhile; then the directory is opened
// again by name from its nearest open ancestor. If that fails too, the directory
// moved: its subdirectories not walked yet are counted as unreadable, and the rest of a
// paused listing as changed.
func (w *walker) reopen(stack []frame, child int) {
	top := &stack[len(stack)-1]
	if child >= 0 {
		var stx unix.Statx_t
		if fd, err := w.openVerified(child, dotDot, top.ino, &stx); err == nil {
			w.resume(top, fd)
			return
		}
	}
	anchor := len(stack) - 2
	for stack[anchor].fd < 0 { // the first frame is always open
		anchor--
	}
	fd := stack[anchor].fd
	for i := anchor + 1; i < len(stack); i++ {
		var stx unix.Statx_t
		next, err := w.openVerified(fd, stack[i].name, stack[i].ino, &stx)
		if fd != stack[anchor].fd {
			closeFD(fd)
		}
		if err != nil {
			w.unreadable.Add(int64(len(top.subdirs)))
			top.subdirs = top.subdirs[:0]
			w.lostListing(top)
			return
		}
		fd = next
	}
	w.resume(top, fd)
}

// resume makes the re-opened fd the fd of f, where f's paused listing reads on.
func (w *walker) resume(f *frame, fd int) {
	f.fd = fd
	if f.more {
		if _, err := unix.Seek(fd, f.pos, io.SeekStart); err != nil {
			w.lostListing(f)
		}
	}
}

// firstSight reports whether a hard-linked inode is seen for the first time. Once
// maxRememberedLinks inodes are remembered, an inode not among them counts as new.
func (w *walker) firstSight(ino uint64) bool {
	w.linksMu.Lock()
	defer w.linksMu.Unlock()
	if _, seen := w.links[ino]; seen {
		return false
	}
	if len(w.links) >= maxRememberedLinks {
		w.unchecked.Add(1)
		return true
	}
	w.links[ino] = struct{}{}
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

// statx and openat take name as a NUL-terminated byte slice, such as a name in a
// getdents64 buffer, so that no string is built per entry (package unix's wrappers
// copy every name they are given). Both retry when interrupted by a signal.

func statx(dirfd int, name []byte, flags int, stx *unix.Statx_t) error {
	for {
		_, _, errno := unix.Syscall6(unix.SYS_STATX, uintptr(dirfd), uintptr(unsafe.Pointer(&name[0])),
			uintptr(flags), statxMask, uintptr(unsafe.Pointer(stx)), 0)
		if errno != unix.EINTR {
			return errnoErr(errno)
		}
	}
}

func openat(dirfd int, name []byte, flags int) (int, error) {
	for {
		fd, _, errno := unix.Syscall6(unix.SYS_OPENAT, uintptr(dirfd), uintptr(unsafe.Pointer(&name[0])),
			uintptr(flags), 0, 0, 0)
		if errno != unix.EINTR {
			return int(fd), errnoErr(errno)
		}
	}
}

func errnoErr(errno unix.Errno) error {
	if errno == 0 {
		return nil
	}
	return errno
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
