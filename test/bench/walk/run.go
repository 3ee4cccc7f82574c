package walk

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/emptydir-guard/emptydir-guard/test/bench/peers"
)

// Config is one benchmark run.
type Config struct {
	// CacheDir keeps the generated trees between runs.
	CacheDir string
	Shapes   []Shape
	Sizes    []int // entries per tree
	// Rounds is how many times each tool measures each tree with a warm cache, interleaved
	// with the others; the median counts.
	Rounds int
	// ColdRounds is the same with the caches dropped before every measurement; 0 skips cold runs.
	ColdRounds int
	// ColdMaxEntries skips cold runs of larger trees (each one drops the machine's caches).
	ColdMaxEntries int
	Runner         Runner
	// GenerateOnly makes Run generate the trees and measure nothing.
	GenerateOnly bool
	// Log receives a line per result as it comes.
	Log io.Writer
}

// Result is the median of every tool on one tree in one cache state.
type Result struct {
	Shape     string
	Entries   int
	Cold      bool
	Reference peers.Usage
	Median    map[Tool]Sample
}

// Report is what Run measured.
type Report struct {
	Results []Result
	// AtRest is the peak RSS of each tool's program walking nothing.
	AtRest map[Tool]int64
}

// Run measures every tree of cfg and checks that every tool reports the bytes and inodes GNU
// du does: a benchmark that compared walks counting different things would prove nothing.
func Run(ctx context.Context, cfg Config) (Report, error) {
	rep := Report{AtRest: map[Tool]int64{}}
	for _, tool := range Tools {
		rss, err := cfg.Runner.AtRest(ctx, tool)
		if err != nil {
			return Report{}, err
		}
		rep.AtRest[tool] = rss
	}
	for _, entries := range cfg.Sizes {
		for _, shape := range cfg.Shapes {
			start := time.Now()
			root, err := Ensure(cfg.CacheDir, shape, entries)
			if err != nil {
				return Report{}, err
			}
			if d := time.Since(start); d > time.Second {
				fmt.Fprintf(cfg.Log, "generated %s-%d in %s\n", shape.Name, entries, d.Round(time.Second))
			}
			if cfg.GenerateOnly {
				continue
			}
			ref, err := Reference(ctx, root) // also warms the cache for the warm rounds
			if err != nil {
				return Report{}, err
			}
			for _, cold := range []bool{false, true} {
				rounds := cfg.Rounds
				if cold {
					rounds = cfg.ColdRounds
					if entries > cfg.ColdMaxEntries {
						rounds = 0
					}
				}
				if rounds == 0 {
					continue
				}
				r, err := measureTree(ctx, cfg.Runner, root, ref, rounds, cold)
				if err != nil {
					return Report{}, fmt.Errorf("%s-%d: %w", shape.Name, entries, err)
				}
				r.Shape, r.Entries = shape.Name, entries
				fmt.Fprintln(cfg.Log, r.line())
				rep.Results = append(rep.Results, r)
			}
		}
	}
	return rep, nil
}

func measureTree(ctx context.Context, runner Runner, root string, ref peers.Usage, rounds int, cold bool) (Result, error) {
	samples := map[Tool][]Sample{}
	for round := range rounds {
		for i := range Tools {
			// Rotate the order each round, so that no tool always runs after the same one.
			tool := Tools[(i+round)%len(Tools)]
			if cold {
				if err := DropCaches(); err != nil {
					return Result{}, err
				}
				if _, err := runner.AtRest(ctx, tool); err != nil {
					return Result{}, fmt.Errorf("warming %s: %w", tool, err)
				}
			}
			s, err := runner.Measure(ctx, tool, root)
			if err != nil {
				return Result{}, err
			}
			if s.Bytes != ref.Bytes || (s.Inodes >= 0 && s.Inodes != ref.Inodes) {
				return Result{}, fmt.Errorf("%s counted %d bytes, %d inodes; GNU du says %d bytes, %d inodes",
					tool, s.Bytes, s.Inodes, ref.Bytes, ref.Inodes)
			}
			samples[tool] = append(samples[tool], s)
		}
	}
	r := Result{Cold: cold, Reference: ref, Median: map[Tool]Sample{}}
	for tool, ss := range samples {
		r.Median[tool] = Sample{
			Bytes: ss[0].Bytes, Inodes: ref.Inodes,
			Wall:   median(ss, func(s Sample) time.Duration { return s.Wall }),
			CPU:    median(ss, func(s Sample) time.Duration { return s.CPU }),
			MaxRSS: median(ss, func(s Sample) int64 { return s.MaxRSS }),
		}
	}
	return r, nil
}

func median[T int64 | time.Duration](ss []Sample, field func(Sample) T) T {
	v := make([]T, len(ss))
	for i, s := range ss {
		v[i] = field(s)
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func (r Result) cache() string {
	if r.Cold {
		return "cold"
	}
	return "warm"
}

func (r Result) line() string {
	o, d, k := r.Median[Ours], r.Median[GNUDu], r.Median[Kubelet]
	return fmt.Sprintf("%-14s %8d %s inodes=%d | wall %s du %s kubelet %s (%.2f, %.2f) | cpu %s du %s kubelet %s (%.2f, %.2f) | rss %s du %s kubelet %s (%.2f, %.2f)",
		r.Shape, r.Entries, r.cache(), r.Reference.Inodes,
		ms(o.Wall), ms(d.Wall), ms(k.Wall), ratio(o.Wall, d.Wall), ratio(o.Wall, k.Wall),
		ms(o.CPU), ms(d.CPU), ms(k.CPU), ratio(o.CPU, d.CPU), ratio(o.CPU, k.CPU),
		mib(o.MaxRSS), mib(d.MaxRSS), mib(k.MaxRSS), ratio(o.MaxRSS, d.MaxRSS), ratio(o.MaxRSS, k.MaxRSS))
}

func ratio[T int64 | time.Duration](a, b T) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
