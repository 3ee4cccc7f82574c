package podcgroup

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// writerEnv makes the test binary a writer (TestCgroupWriterHelperProcess): a process the test
// moves into a cgroup of its own, as a container's, and tells what to write, one line each.
const writerEnv = "PODCGROUP_TEST_WRITER"

// fsJournalDataFl is FS_JOURNAL_DATA_FL of linux/fs.h (chattr +j), which x/sys/unix lacks.
const fsJournalDataFl = 0x00004000

// writer is the test's side of a writer process.
type writer struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

// startWriter runs the test binary again as a writer, not yet in any cgroup of the test's;
// it is killed when the test ends.
func startWriter(t *testing.T) *writer {
	t.Helper()
	cmd := exec.Command("/proc/self/exe", "-test.run=^TestCgroupWriterHelperProcess$")
	cmd.Env = append(os.Environ(), writerEnv+"=1", "GODEBUG=madvdontneed=0")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := &writer{cmd: cmd, in: in, out: bufio.NewReader(out)}
	t.Cleanup(func() { w.stop() })
	return w
}

// stop ends the writer and waits for it: its cgroup can then be removed.
func (w *writer) stop() {
	if w.cmd.ProcessState != nil {
		return
	}
	_ = w.in.Close()
	_ = w.cmd.Process.Kill()
	_ = w.cmd.Wait()
}

// join moves the writer into the cgroup directories (one per v1 hierarchy): what it charges from
// then on is theirs.
func (w *writer) join(t *testing.T, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(w.cmd.Process.Pid)), 0); err != nil {
			t.Fatalf("moving the writer into %s: %v", d, err)
		}
	}
}

// do has the writer run one operation (writerOp) and waits until it has.
func (w *writer) do(t *testing.T, op string, args ...string) {
	t.Helper()
	line := strings.Join(append([]string{op}, args...), " ")
	if _, err := fmt.Fprintln(w.in, line); err != nil {
		t.Fatalf("writer %q: %v", line, err)
	}
	reply, err := w.out.ReadString('\n')
	if err != nil || reply != "ok\n" {
		t.Fatalf("writer %q: %q, %v", line, reply, err)
	}
}

// TestCgroupWriterHelperProcess is the writer; outside startWriter, it is skipped.
func TestCgroupWriterHelperProcess(t *testing.T) {
	if os.Getenv(writerEnv) != "1" {
		t.Skip("run by startWriter only")
	}
	// One page-aligned buffer for every write (O_DIRECT needs the alignment), made before the
	// writer joins a cgroup: its pages stay charged where they were first touched.
	buf, err := unix.Mmap(-1, 0, 4<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for i := range buf {
		buf[i] = 'x'
	}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		f := strings.Fields(in.Text())
		if err := writerOp(buf, f[0], f[1:]); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", in.Text(), err)
			os.Exit(1)
		}
		fmt.Println("ok")
	}
	os.Exit(0)
}

// writerOp runs one operation; sizes are bytes, at most the buffer's.
func writerOp(buf []byte, op string, a []string) error {
	n := 0
	if len(a) > 1 && op != "move" {
		var err error
		if n, err = strconv.Atoi(a[1]); err != nil {
			return err
		}
	}
	switch op {
	case "noop":
		return nil
	case "freeze":
		// From here on, the writer's small allocations reuse heap pages already touched (and
		// charged where it was then): no collection frees them for the OS to take back, and
		// what the scavenger returns stays mapped (MADV_FREE, startWriter's GODEBUG).
		runtime.GC()
		debug.SetGCPercent(-1)
		return nil
	case "write", "syncwrite": // a new file, through the page cache
		return writeFile(a[0], os.O_CREATE|os.O_TRUNC|os.O_WRONLY, buf[:n], 0, op == "syncwrite")
	case "append":
		return writeFile(a[0], os.O_APPEND|os.O_WRONLY, buf[:n], -1, true)
	case "overwrite": // in place, from offset 0 of an existing file
		return writeFile(a[0], os.O_WRONLY, buf[:n], 0, true)
	case "direct": // a new file, around the page cache
		return writeFile(a[0], os.O_CREATE|os.O_TRUNC|os.O_WRONLY|syscall.O_DIRECT, buf[:n], 0, true)
	case "sparse": // a file of n bytes of hole, read whole (its pages cached, charged here)
		if err := os.WriteFile(a[0], nil, 0o644); err != nil {
			return err
		}
		if err := os.Truncate(a[0], int64(n)); err != nil {
			return err
		}
		_, err := os.ReadFile(a[0])
		return err
	case "fallocate":
		fd, err := unix.Open(a[0], unix.O_CREAT|unix.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return unix.Fallocate(fd, 0, 0, int64(n))
	case "touch", "mkdir": // n empty files or directories in the new directory a[0]
		if err := os.Mkdir(a[0], 0o755); err != nil {
			return err
		}
		name := make([]byte, 0, len(a[0])+32)
		for i := range n {
			if err := create(name, a[0], i, op == "mkdir"); err != nil {
				return err
			}
		}
		return nil
	case "xattr": // n bytes of user.* extended attribute on a new empty file
		if err := os.WriteFile(a[0], nil, 0o644); err != nil {
			return err
		}
		return unix.Setxattr(a[0], "user.big", buf[:n], 0)
	case "balance": // a new file a[0] of n bytes, buffered, and a[2] truncated to nothing
		if err := writeFile(a[0], os.O_CREATE|os.O_TRUNC|os.O_WRONLY, buf[:n], 0, false); err != nil {
			return err
		}
		return os.Truncate(a[2], 0)
	case "zerorange": // the first n bytes of a[0] zeroed by FALLOC_FL_ZERO_RANGE (blocks kept)
		fd, err := unix.Open(a[0], unix.O_WRONLY, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return unix.Fallocate(fd, unix.FALLOC_FL_ZERO_RANGE|unix.FALLOC_FL_KEEP_SIZE, 0, int64(n))
	case "bigwrite": // a new file of n bytes, buffered, written a buffer at a time (n may exceed it)
		f, err := os.OpenFile(a[0], os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		for n > 0 {
			k, err := f.Write(buf[:min(n, len(buf))])
			if err != nil {
				return errors.Join(err, f.Close())
			}
			n -= k
		}
		return f.Close()
	case "jwrite": // a new file of n bytes, buffered, its data journaled (chattr +j, CAP_SYS_RESOURCE)
		f, err := os.OpenFile(a[0], os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		flags, err := unix.IoctlGetUint32(int(f.Fd()), unix.FS_IOC_GETFLAGS)
		if err == nil {
			err = unix.IoctlSetPointerInt(int(f.Fd()), unix.FS_IOC_SETFLAGS, int(flags|fsJournalDataFl))
		}
		if err == nil {
			_, err = f.Write(buf[:n])
		}
		return errors.Join(err, f.Close())
	case "move": // a[0] to a[2], as a copy and a removal
		b, err := os.ReadFile(a[0])
		if err != nil {
			return err
		}
		if err := os.WriteFile(a[2], b, 0o644); err != nil {
			return err
		}
		return os.Remove(a[0])
	}
	return fmt.Errorf("no operation %q", op)
}

// create makes the empty file or directory dir/i, allocating nothing: the garbage of thousands of
// names would grow the writer's heap, whose new pages its cgroup would count as a write's.
func create(name []byte, dir string, i int, directory bool) error {
	name = strconv.AppendInt(append(append(name[:0], dir...), '/'), int64(i), 10)
	name = append(name, 0)
	p := uintptr(unsafe.Pointer(&name[0]))
	cwd := unix.AT_FDCWD
	if directory {
		if _, _, errno := unix.Syscall(unix.SYS_MKDIRAT, uintptr(cwd), p, 0o755); errno != 0 {
			return errno
		}
		return nil
	}
	fd, _, errno := unix.Syscall6(unix.SYS_OPENAT, uintptr(cwd), p, unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644, 0, 0)
	if errno != 0 {
		return errno
	}
	return unix.Close(int(fd))
}

func writeFile(name string, flags int, b []byte, off int64, sync bool) error {
	f, err := os.OpenFile(name, flags, 0o644)
	if err != nil {
		return err
	}
	if off >= 0 {
		_, err = f.WriteAt(b, off)
	} else {
		_, err = f.Write(b)
	}
	if err == nil && sync {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

// makeCgroup makes a cgroup directory at dir and removes it when the test ends (its processes
// gone: a cgroup that just lost its last one may answer EBUSY for a moment).
func makeCgroup(t *testing.T, dir string) {
	t.Helper()
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeCgroup(t, dir) })
}

func removeCgroup(t *testing.T, dir string) {
	t.Helper()
	for i := 0; ; i++ {
		err := unix.Rmdir(dir)
		if err == nil || errors.Is(err, unix.ENOENT) {
			return
		}
		if i == 50 {
			t.Errorf("rmdir %s: %v", dir, err)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}
