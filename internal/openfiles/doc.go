// Package openfiles counts what no walk can: the regular files that processes hold open after
// their last name is gone (nlink 0), on one directory's filesystem, below that directory. A file is
// attributed by the mount the process opened it through (fdinfo's mnt_id): that mount's root,
// chosen by the kubelet, must be the directory or below it; nothing a tenant writes takes part.
// Each inode counts once, with its allocated blocks, as a walk counts a file. Reading another
// process's descriptors needs PTRACE_MODE_READ (CAP_SYS_PTRACE, no Landlock domain on the
// reader). The system calls live in *_linux.go.
package openfiles

import "errors"

// Target is a directory whose processes' unlinked open files are counted.
type Target struct {
	// Dev is the device number of the directory's filesystem (st_dev).
	Dev uint64
	// Root is the directory's path from its filesystem's root, as mountinfo's root field spells it.
	Root string
}

// Usage is what the unlinked open files of a Target hold.
type Usage struct {
	// Bytes is their allocated blocks, each inode once.
	Bytes int64
	// Files is how many inodes they are.
	Files int64
}

// MaxDescriptors bounds the descriptors one Count reads, over all its processes: each costs a
// stat through procfs (about 7µs on the 2-core development machine, BenchmarkCountAgainstWalk),
// so a pod cannot make a count cost more than about half a second of CPU.
const MaxDescriptors = 1 << 16

// ErrTooManyDescriptors says the processes hold more than MaxDescriptors descriptors: the count
// stops, and the caller reports the volume's usage as a lower bound.
var ErrTooManyDescriptors = errors.New("the pod's processes hold more descriptors than are read in one count")

// ErrDenied says a process's descriptors could not be read: the reader lacks CAP_SYS_PTRACE,
// or a Landlock domain keeps it from inspecting processes outside it.
var ErrDenied = errors.New("reading another process's open files was denied (needs CAP_SYS_PTRACE and no Landlock domain)")
