package node

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// usage is what the process spent between two probes.
type usage struct {
	wall, cpu   time.Duration
	mallocs     uint64
	allocBytes  uint64
	peakRSSByte int64
	// walkCPU is the CPU the exporter's walks charged (emptydir_exporter_walk_cpu_seconds_total), where read.
	walkCPU time.Duration
}

// plus is u and v one after the other: their peak RSS the higher.
func (u usage) plus(v usage) usage {
	return usage{wall: u.wall + v.wall, cpu: u.cpu + v.cpu, mallocs: u.mallocs + v.mallocs, allocBytes: u.allocBytes + v.allocBytes,
		peakRSSByte: max(u.peakRSSByte, v.peakRSSByte), walkCPU: u.walkCPU + v.walkCPU}
}

// probe marks the start of a measured phase: it resets the process's peak RSS (where the
// kernel allows it) and reads the CPU and allocation counters.
type probe struct {
	wall    time.Time
	cpu     time.Duration
	mallocs uint64
	alloc   uint64
}

func startProbe() probe {
	runtime.GC()
	// "5" resets the peak resident set size (VmHWM) to the current one (Linux 4.0+).
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return probe{wall: time.Now(), cpu: processCPU(), mallocs: ms.Mallocs, alloc: ms.TotalAlloc}
}

func (p probe) stop() usage {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return usage{wall: time.Since(p.wall), cpu: processCPU() - p.cpu,
		mallocs: ms.Mallocs - p.mallocs, allocBytes: ms.TotalAlloc - p.alloc, peakRSSByte: peakRSS()}
}

// heapAllocs is the heap objects the process has allocated so far, tiny ones included (as
// runtime.MemStats.Mallocs counts them), read without stopping the world.
func heapAllocs() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:objects"}, {Name: "/gc/heap/tiny/allocs:objects"}}
	metrics.Read(s)
	var n uint64
	for _, x := range s {
		if x.Value.Kind() == metrics.KindUint64 {
			n += x.Value.Uint64()
		}
	}
	return n
}

// processCPU is the user and system CPU time of the process.
func processCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		panic(fmt.Sprintf("getrusage: %v", err))
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// threadCPU is the CPU time of the calling thread (CLOCK_THREAD_CPUTIME_ID).
func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		panic(fmt.Sprintf("clock_gettime: %v", err))
	}
	return time.Duration(ts.Nano())
}

// peakRSS is the process's peak resident set size since the last reset (VmHWM).
func peakRSS() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// loadAverage is the first field of /proc/loadavg, to say how busy the machine was.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(b))[0]
}

func numCPU() int       { return runtime.NumCPU() }
func goVersion() string { return runtime.Version() }

// cpuProfile writes the process's CPU profile to path until the returned stop is called.
func cpuProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
