// Package walkchild is the measuring side of the walk benchmark: a small program per tool
// (cmd/walk-ours, cmd/walk-kubelet, cmd/walk-du) measures one tree and prints a Sample, so that
// the CPU time and peak RSS are the walk's and its program's alone. It imports neither the
// product nor Kubernetes, so that each child's footprint is its own tool's.
//
// Peak RSS cannot come from the parent's wait4: Linux carries the RSS high-water mark of the
// process that forked a child into the child's ru_maxrss, so every child of the benchmark
// driver would report at least the driver's size. A Go walk reads its own VmHWM instead, and du
// runs below walk-du, a launcher smaller than du itself.
package walkchild

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Sample is one measurement of one tree by one tool.
type Sample struct {
	Bytes, Inodes int64
	// Wall and CPU (user+system, all threads) of the walk.
	Wall, CPU time.Duration
	// MaxRSS is the peak resident set of the measuring process, in bytes.
	MaxRSS int64
}

// Walk measures one directory in this process, returning its bytes and inodes.
type Walk func(root string, concurrency int) (bytes, inodes int64, err error)

// Main runs walk on the directory and at the concurrency given as arguments, and prints the
// Sample as JSON on stdout. The directory "-" walks nothing: it loads the program only, to
// measure its footprint at rest and so that a cold-cache measurement does not pay for reading
// the tool's executable.
func Main(walk Walk) {
	exit(func(root string, concurrency int) (Sample, error) {
		var s Sample
		if root != "-" {
			cpu0, err := cpuTime()
			if err != nil {
				return Sample{}, err
			}
			start := time.Now()
			s.Bytes, s.Inodes, err = walk(root, concurrency)
			s.Wall = time.Since(start)
			if err != nil {
				return Sample{}, err
			}
			cpu1, err := cpuTime()
			if err != nil {
				return Sample{}, err
			}
			s.CPU = cpu1 - cpu0
		}
		var err error
		s.MaxRSS, err = peakRSS()
		return s, err
	})
}

// MainCommand is Main for a tool that is a program of its own: it runs argv(root) (argv("-")
// to load it only), measures that process from start to exit, and takes the bytes from the
// first field of its output.
func MainCommand(argv func(root string) []string) {
	exit(func(root string, _ int) (Sample, error) {
		args := argv(root)
		cmd := exec.Command(args[0], args[1:]...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		start := time.Now()
		err := cmd.Run()
		wall := time.Since(start)
		if err != nil {
			return Sample{}, fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
		}
		ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
		s := Sample{
			Inodes: -1, Wall: wall,
			CPU:    time.Duration(syscall.TimevalToNsec(ru.Utime) + syscall.TimevalToNsec(ru.Stime)),
			MaxRSS: ru.Maxrss << 10, // kilobytes on Linux
		}
		if root == "-" {
			return s, nil
		}
		f := strings.Fields(stdout.String())
		if len(f) == 0 {
			return Sample{}, fmt.Errorf("%s: empty output", strings.Join(args, " "))
		}
		if s.Bytes, err = strconv.ParseInt(f[0], 10, 64); err != nil {
			return Sample{}, fmt.Errorf("%s: %w", strings.Join(args, " "), err)
		}
		return s, nil
	})
}

func exit(measure func(root string, concurrency int) (Sample, error)) {
	err := func() error {
		if len(os.Args) != 3 {
			return fmt.Errorf("usage: %s DIRECTORY CONCURRENCY", os.Args[0])
		}
		concurrency, err := strconv.Atoi(os.Args[2])
		if err != nil {
			return fmt.Errorf("concurrency: %w", err)
		}
		s, err := measure(os.Args[1], concurrency)
		if err != nil {
			return err
		}
		return json.NewEncoder(os.Stdout).Encode(s)
	}()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// cpuTime is the user+system time of the whole process, every thread included.
func cpuTime() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	return time.Duration(syscall.TimevalToNsec(ru.Utime) + syscall.TimevalToNsec(ru.Stime)), nil
}

// peakRSS is this program's VmHWM: the high-water mark of its own address space since exec.
func peakRSS() (int64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/self/status: %w", sc.Err())
}
