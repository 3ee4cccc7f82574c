package openfiles

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// TargetOf is the Target of dir as this process sees it: its device, and its path from its
// filesystem's root, found through the mount it lies on in /proc/self/mountinfo (the longest
// mount point above it on its device; the later of equal ones, which covers the earlier).
func TargetOf(dir string) (Target, error) {
	dir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return Target{}, err
	}
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return Target{}, &os.PathError{Op: "stat", Path: dir, Err: err}
	}
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return Target{}, err
	}
	mounts, err := parseMountinfo(b)
	if err != nil {
		return Target{}, err
	}
	best, found := mount{}, false
	for _, m := range mounts {
		if m.dev != st.Dev || !within(dir, m.point) {
			continue
		}
		if !found || len(m.point) >= len(best.point) {
			best, found = m, true
		}
	}
	if !found {
		return Target{}, fmt.Errorf("no mount of device %d:%d holds %s in /proc/self/mountinfo", unix.Major(st.Dev), unix.Minor(st.Dev), dir)
	}
	rel, err := filepath.Rel(best.point, dir)
	if err != nil {
		return Target{}, err
	}
	return Target{Dev: st.Dev, Root: path.Join(best.root, filepath.ToSlash(rel))}, nil
}

// maxDescriptors is MaxDescriptors; tests lower it.
var maxDescriptors = MaxDescriptors

// Count adds up the regular files without a link that the processes pids (IDs in the PID
// namespace of the procfs at proc) hold open on t's device through a mount whose root is
// t.Root or below it, each inode once. A process or descriptor gone meanwhile is skipped; one
// that may not be read fails the count with ErrDenied.
func Count(proc string, pids []int, t Target) (Usage, error) {
	var u Usage
	seen := map[uint64]bool{}
	budget := maxDescriptors
	for _, pid := range pids {
		if err := countProcess(proc, pid, t, seen, &u, &budget); err != nil {
			return u, err
		}
	}
	return u, nil
}

func countProcess(proc string, pid int, t Target, seen map[uint64]bool, u *Usage, budget *int) error {
	dir := filepath.Join(proc, strconv.Itoa(pid))
	// One open directory, each descriptor stat'ed relative to it: the path walk through procfs
	// was most of the cost.
	fdDir, err := os.Open(filepath.Join(dir, "fd"))
	if err != nil {
		return classify(err)
	}
	defer fdDir.Close()
	fds, err := fdDir.Readdirnames(-1)
	if err != nil {
		return classify(err)
	}
	if *budget -= len(fds); *budget < 0 {
		return ErrTooManyDescriptors
	}
	var roots map[int]string // the process's mounts' roots, by mount ID, read on first need
	for _, fd := range fds {
		var st unix.Stat_t
		if err := unix.Fstatat(int(fdDir.Fd()), fd, &st, 0); err != nil {
			if err := classify(err); err != nil {
				return err
			}
			continue
		}
		if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Nlink != 0 || st.Dev != t.Dev || seen[st.Ino] {
			continue
		}
		id, ok, err := mountID(filepath.Join(dir, "fdinfo", fd))
		if err != nil || !ok {
			if err := classify(err); err != nil {
				return err
			}
			continue
		}
		if roots == nil {
			b, err := os.ReadFile(filepath.Join(dir, "mountinfo"))
			if err != nil {
				return classify(err)
			}
			mounts, err := parseMountinfo(b)
			if err != nil {
				return fmt.Errorf("process %d: %w", pid, err)
			}
			roots = map[int]string{}
			for _, m := range mounts {
				roots[m.id] = m.root
			}
		}
		if root, ok := roots[id]; !ok || !within(root, t.Root) {
			continue
		}
		seen[st.Ino] = true
		u.Bytes += st.Blocks * 512
		u.Files++
	}
	return nil
}

// classify drops what a process or descriptor ending meanwhile causes (nil) and turns a denial
// into ErrDenied.
func classify(err error) error {
	switch {
	case err == nil, errors.Is(err, fs.ErrNotExist), errors.Is(err, unix.ESRCH):
		return nil
	case errors.Is(err, fs.ErrPermission), errors.Is(err, unix.EPERM):
		return fmt.Errorf("%w: %w", ErrDenied, err)
	default:
		return err
	}
}

// mountID is the mnt_id line of an fdinfo file: the mount the descriptor was opened through.
func mountID(fdinfo string) (int, bool, error) {
	b, err := os.ReadFile(fdinfo)
	if err != nil {
		return 0, false, err
	}
	for line := range bytes.Lines(b) {
		if v, ok := bytes.CutPrefix(line, []byte("mnt_id:")); ok {
			id, err := strconv.Atoi(string(bytes.TrimSpace(v)))
			return id, err == nil, nil
		}
	}
	return 0, false, nil
}

// mount is one line of a mountinfo file (proc(5)).
type mount struct {
	id          int
	dev         uint64
	root, point string
}

// parseMountinfo reads a mountinfo file: "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3
// /dev/root rw".
func parseMountinfo(b []byte) ([]mount, error) {
	var out []mount
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) < 5 {
			return nil, fmt.Errorf("mountinfo line %q has fewer than 5 fields", line)
		}
		id, err := strconv.Atoi(f[0])
		if err != nil {
			return nil, fmt.Errorf("mountinfo line %q: %w", line, err)
		}
		majS, minS, ok := strings.Cut(f[2], ":")
		maj, err1 := strconv.ParseUint(majS, 10, 32)
		minr, err2 := strconv.ParseUint(minS, 10, 32)
		if !ok || err1 != nil || err2 != nil {
			return nil, fmt.Errorf("mountinfo line %q: device %q", line, f[2])
		}
		out = append(out, mount{id: id, dev: unix.Mkdev(uint32(maj), uint32(minr)), root: unescape(f[3]), point: unescape(f[4])})
	}
	return out, nil
}

// unescape undoes mountinfo's octal escapes (\040 for a space, \011, \012, \134).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// within reports whether p is dir or a path below it.
func within(p, dir string) bool {
	return p == dir || dir == "/" && strings.HasPrefix(p, "/") || strings.HasPrefix(p, dir+"/")
}

// helperAttr kills the helper when the thread that started it ends (the process, as a rule).
func helperAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// initialPIDNamespaceIno is the inode number of the initial PID namespace's /proc/<pid>/ns/pid
// (PROC_PID_INIT_INO in include/linux/proc_ns.h), the same on every kernel.
const initialPIDNamespaceIno = 0xEFFFFFFC

// InInitialPIDNamespace reports whether this process is in the node's initial PID namespace
// (hostPID on a node that is no container itself). cgroup v1's cgroup.procs leaves out the
// processes a reader cannot name, where v2 shows them as 0: outside it, a pod whose cgroups list
// no process may be one whose processes are hidden.
func InInitialPIDNamespace() bool {
	var st unix.Stat_t
	return unix.Stat("/proc/self/ns/pid", &st) == nil && st.Ino == initialPIDNamespaceIno
}
