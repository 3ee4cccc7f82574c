package podcgroup

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// Snapshot is what a pod's cgroup says it has written, read at one moment: comparable with ==.
// Two equal snapshots of one pod say that its processes charged no new page to the page
// cache or a tmpfs in between, and, with cgroup v2, had none of their dirty pages written back
// (docs/change-signal.md: what each counter counts, and what none sees).
type Snapshot struct {
	Version Version
	// Cgroup is the inode number of the pod's cgroup directory: a cgroup made again restarts its
	// counters from zero, and must not compare equal to its predecessor by chance.
	Cgroup uint64

	// PgpgIn is v1's total_pgpgin: the pages (a huge page once) charged to the pod's cgroup or
	// its containers', anonymous, page cache and tmpfs alike; cumulative.
	PgpgIn uint64
	// Dirty and Writeback are the bytes of file pages dirty and under writeback now: v1's
	// total_dirty and total_writeback, v2's file_dirty and file_writeback; gauges.
	Dirty, Writeback uint64

	// File and Shmem are v2's file (page cache, tmpfs included) and shmem bytes; gauges.
	File, Shmem uint64
	// WriteBytes and WriteIOs are v2's io.stat wbytes and wios summed over devices: the
	// writes submitted under the pod's cgroup, its dirty pages' writeback included on a
	// filesystem with cgroup writeback (WritebackCharged); cumulative.
	WriteBytes, WriteIOs uint64
}

// Medium is where a pod's file lives.
type Medium int

const (
	// Disk is a filesystem on a block device: writable layers, disk emptyDirs.
	Disk Medium = iota
	// Memory is a tmpfs: medium: Memory emptyDirs, /dev/shm.
	Memory
)

// Vouches reports whether equal snapshots may spare a walk of files on m: the counters see
// every write that takes a new page there (the holes every medium shares are the caller's to
// bound: docs/change-signal.md). With cgroup v2 a tmpfs's pages are counted only by gauges
// (shmem, file), which a pod holds equal by freeing as much as it writes (a move from one
// memory volume to another), so no v2 snapshot vouches for Memory.
func (s Snapshot) Vouches(m Medium) bool {
	return s.Version == V1 || m == Disk
}

// Read reads the pod's snapshot now: memory.stat (and io.stat with v2) of its cgroup, whose
// counters include its containers' cgroups'. An error is an *Error: ReasonNotFound when the
// cgroup is gone, ReasonUnsound when v2's io.stat is missing, else ReasonUnreadable.
func (p Pod) Read() (Snapshot, error) {
	id, err := dirID(p.Dir)
	if err != nil {
		return Snapshot{}, readFailure(err)
	}
	s := Snapshot{Version: p.Version, Cgroup: id}
	buf := statBuffers.Get().(*bytes.Buffer)
	defer statBuffers.Put(buf)
	memStat := filepath.Join(p.Dir, "memory.stat")
	b, err := readInto(memStat, buf)
	if err != nil {
		return Snapshot{}, readFailure(err)
	}
	var fields []keyedField
	if p.Version == V1 {
		// total_*: hierarchical, so the containers' child cgroups count (memory.rst, 5.2).
		fields = []keyedField{{"total_pgpgin", &s.PgpgIn}, {"total_dirty", &s.Dirty}, {"total_writeback", &s.Writeback}}
	} else {
		fields = []keyedField{{"file", &s.File}, {"shmem", &s.Shmem}, {"file_dirty", &s.Dirty}, {"file_writeback", &s.Writeback}}
	}
	if err := scanKeyed(b, memStat, fields); err != nil {
		return Snapshot{}, fail(ReasonUnreadable, err)
	}
	if p.Version == V2 {
		if s.WriteBytes, s.WriteIOs, err = readIOStat(filepath.Join(p.Dir, "io.stat")); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				// Without the io controller a written-back page leaves no trace in the pod's cgroup.
				return Snapshot{}, fail(ReasonUnsound, fmt.Errorf("no io controller in %s: %w", p.Dir, err))
			}
			return Snapshot{}, readFailure(err)
		}
	}
	return s, nil
}

func readFailure(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fail(ReasonNotFound, err)
	}
	return fail(ReasonUnreadable, err)
}

// readIOStat sums wbytes and wios over the devices of a v2 io.stat (nested keyed:
// "MAJ:MIN rbytes=… wbytes=… rios=… wios=… dbytes=… dios=…", cgroup-v2.rst).
func readIOStat(file string) (wbytes, wios uint64, err error) {
	buf := statBuffers.Get().(*bytes.Buffer)
	defer statBuffers.Put(buf)
	b, err := readInto(file, buf)
	if err != nil {
		return 0, 0, err
	}
	return parseIOStat(b, file)
}

// statBuffers hold the reads of the stat files: a mark is read per pod and cycle, and a fresh
// buffer each time was most of what it allocated.
var statBuffers = sync.Pool{New: func() any { return bytes.NewBuffer(make([]byte, 0, 8192)) }}

// readInto reads the whole file into buf, emptied first, and returns its bytes (valid until
// buf is used again).
func readInto(file string, buf *bytes.Buffer) ([]byte, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf.Reset()
	if _, err := buf.ReadFrom(f); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// keyedField is a key of a flat keyed file and where its value goes.
type keyedField struct {
	key string
	dst *uint64
}

// scanKeyed reads the values of fields from b, a flat keyed file ("key value" lines,
// memory.stat's format), without building a map of every key; a field missing is an error.
func scanKeyed(b []byte, file string, fields []keyedField) error {
	var found uint64 // bit i: fields[i] read
	for line := range bytes.Lines(b) {
		k, v, ok := bytes.Cut(bytes.TrimSuffix(line, []byte("\n")), []byte(" "))
		if !ok {
			return fmt.Errorf("%s: line %q is no key and value", file, line)
		}
		for i, f := range fields {
			if string(k) != f.key {
				continue
			}
			n, err := strconv.ParseUint(string(v), 10, 64)
			if err != nil {
				return fmt.Errorf("%s: %s: %w", file, k, err)
			}
			*f.dst = n
			found |= 1 << i
		}
	}
	for i, f := range fields {
		if found&(1<<i) == 0 {
			return fmt.Errorf("%s has no %s", file, f.key)
		}
	}
	return nil
}

func parseIOStat(b []byte, file string) (wbytes, wios uint64, err error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		for _, f := range fields[min(1, len(fields)):] {
			k, v, ok := strings.Cut(f, "=")
			if !ok || (k != "wbytes" && k != "wios") {
				continue
			}
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return 0, 0, fmt.Errorf("%s: %s: %w", file, f, err)
			}
			if k == "wbytes" {
				wbytes += n
			} else {
				wios += n
			}
		}
	}
	return wbytes, wios, sc.Err()
}
