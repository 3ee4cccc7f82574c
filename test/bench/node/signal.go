package node

import (
	"hash/fnv"
	"os"
	"sync"
	"time"

	"github.com/emptydir-guard/emptydir-guard/exporter/change"
	"github.com/emptydir-guard/emptydir-guard/exporter/part"
	"github.com/emptydir-guard/emptydir-guard/internal/podcgroup"
)

// benchSignal stands in for the pods' cgroups (change.Cgroup) on the generated node,
// whose pods have no processes: a share of the pods "writes" in each cycle-long generation,
// chosen afresh per generation by a hash of the pod's UID, and a pod holding an over-limit
// write changes its mark when that file does, as its cgroup's counters would. Each Mark reads
// this machine's own memory.stat, as change.Cgroup reads a pod's, so the runs pay a real read.
type benchSignal struct {
	writers float64
	start   time.Time
	// overPaths are the over-limit writes' files, by their pods' UIDs.
	overPaths map[string]string
	statPath  string

	mu sync.Mutex
	// readAt is when each pod's mark was last read, by UID.
	readAt map[string]time.Time
}

func newBenchSignal(writers float64, targets []overLimitTarget) *benchSignal {
	s := &benchSignal{writers: writers, start: time.Now(), overPaths: map[string]string{}, readAt: map[string]time.Time{}}
	for _, o := range targets {
		s.overPaths[o.uid] = o.path
	}
	for _, p := range []string{"/sys/fs/cgroup/memory/memory.stat", "/sys/fs/cgroup/memory.stat"} {
		if _, err := os.Stat(p); err == nil {
			s.statPath = p
			break
		}
	}
	return s
}

// benchMark is a pod's mark: the last generation it wrote in, and the size of its over-limit
// file.
type benchMark struct {
	wrote    int64
	overSize int64
}

func (s *benchSignal) generation(at time.Time) int64 { return int64(at.Sub(s.start) / defaultCycle) }

// writes reports whether the pod writes in generation g.
func (s *benchSignal) writes(uid string, g int64) bool {
	if s.writers <= 0 {
		return false
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(uid))
	_, _ = h.Write([]byte{byte(g), byte(g >> 8), byte(g >> 16), byte(g >> 24)})
	return float64(h.Sum64()%10000) < s.writers*10000
}

// lastWrite is the start of the last generation up to at in which the pod wrote; zero: never.
func (s *benchSignal) lastWrite(uid string, at time.Time) time.Time {
	for g := s.generation(at); g >= 0 && g > s.generation(at)-100000; g-- {
		if s.writes(uid, g) {
			return s.start.Add(time.Duration(g) * defaultCycle)
		}
	}
	return time.Time{}
}

func (s *benchSignal) Mark(p part.Pod) (change.Mark, error) {
	now := time.Now()
	if s.statPath != "" {
		if _, err := os.ReadFile(s.statPath); err != nil {
			return change.Mark{}, &change.Error{Reason: "unreadable", Err: err}
		}
	}
	m := benchMark{wrote: -1}
	if w := s.lastWrite(p.UID, now); !w.IsZero() {
		m.wrote = s.generation(w)
	}
	if path, ok := s.overPaths[p.UID]; ok {
		if fi, err := os.Stat(path); err == nil {
			m.overSize = fi.Size()
		}
	}
	s.mu.Lock()
	s.readAt[p.UID] = now
	s.mu.Unlock()
	// As a cgroup's counters would: a write moves one, the over-limit file's growth another.
	return change.MarkOf(podcgroup.Snapshot{WriteIOs: uint64(m.wrote + 1), WriteBytes: uint64(m.overSize)}), nil
}

// Vouches as change.Cgroup does under cgroup v1 on a disk root: emptyDirs and writable layers.
func (s *benchSignal) Vouches(v part.Part) bool {
	return v.Kind == part.KindEmptyDir || v.Kind == part.KindWritableLayer
}

// freshAt is since when a part's figure, walked from walked on, is known to stand: the last
// read of its pod's mark when the pod has not written since the walk began (what
// emptydir_measurement_unchanged_timestamp_seconds publishes), else the walk's start.
func (s *benchSignal) freshAt(uid string, walked time.Time) time.Time {
	s.mu.Lock()
	read := s.readAt[uid]
	s.mu.Unlock()
	if read.After(walked) && s.lastWrite(uid, read).Before(walked) {
		return read
	}
	return walked
}
