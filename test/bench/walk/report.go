package walk

import (
	"fmt"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// metric is one column group of the report.
type metric struct {
	title  string
	value  func(Sample) float64
	format func(float64) string
}

var metrics = []metric{
	{"Wall time", func(s Sample) float64 { return float64(s.Wall) }, func(v float64) string { return ms(time.Duration(v)) }},
	{"CPU time (user+system)", func(s Sample) float64 { return float64(s.CPU) }, func(v float64) string { return ms(time.Duration(v)) }},
	{"Peak RSS", func(s Sample) float64 { return float64(s.MaxRSS) }, func(v float64) string { return mib(int64(v)) }},
}

// Markdown renders results as one table per metric, ours beside each peer and the ratios, then
// how ours' peak RSS grows with the tree.
func Markdown(cfg Config, rep Report) string {
	results := rep.Results
	var b strings.Builder
	fmt.Fprintf(&b, "Measured on %s with ours at `--fs.walk-concurrency=%d`; median of %d warm-cache runs",
		machine(cfg.CacheDir), cfg.Runner.Concurrency, cfg.Rounds)
	if cfg.ColdRounds > 0 {
		fmt.Fprintf(&b, " and %d cold-cache run(s) (caches dropped before each; trees up to %d entries)",
			cfg.ColdRounds, cfg.ColdMaxEntries)
	} else {
		b.WriteString("; no cold-cache runs")
	}
	b.WriteString(" per tool and tree, the tools interleaved. Every run of every tool reported the bytes and inodes of `du -s -B1 -x` / `du -s -x --inodes`.\n\n")
	b.WriteString("Trees: ")
	for i, s := range cfg.Shapes {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "`%s`: %s", s.Name, s.Doc)
	}
	fmt.Fprintf(&b, ". Ratios below 1 mean ours is cheaper. Peak RSS includes the program itself: walking nothing, ours takes %s (package fswalk alone: the exporter's other dependencies, client-go among them, are not in walk-ours), du %s (under its launcher, see package walkchild), the kubelet's walk %s.\n",
		mib(rep.AtRest[Ours]), mib(rep.AtRest[GNUDu]), mib(rep.AtRest[Kubelet]))

	for _, m := range metrics {
		fmt.Fprintf(&b, "\n**%s**\n\n| tree | entries | cache | ours | du | kubelet | ours/du | ours/kubelet |\n| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |\n", m.title)
		for _, r := range results {
			o, d, k := m.value(r.Median[Ours]), m.value(r.Median[GNUDu]), m.value(r.Median[Kubelet])
			fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %.2f | %.2f |\n",
				r.Shape, r.Reference.Inodes, r.cache(), m.format(o), m.format(d), m.format(k), o/d, o/k)
		}
	}

	growth := rssGrowth(cfg, results)
	if growth != "" {
		b.WriteString("\n**Peak RSS as the tree grows 10× (warm cache)**\n\n| tree | entries | ours | du | kubelet |\n| --- | --- | ---: | ---: | ---: |\n")
		b.WriteString(growth)
	}
	return b.String()
}

// rssGrowth is a row per shape and consecutive pair of sizes 10× apart: each tool's peak RSS on
// the larger tree over that on the smaller.
func rssGrowth(cfg Config, results []Result) string {
	warm := map[string]Result{}
	for _, r := range results {
		if !r.Cold {
			warm[fmt.Sprintf("%s/%d", r.Shape, r.Entries)] = r
		}
	}
	var b strings.Builder
	for _, s := range cfg.Shapes {
		for _, small := range cfg.Sizes {
			lo, ok1 := warm[fmt.Sprintf("%s/%d", s.Name, small)]
			hi, ok2 := warm[fmt.Sprintf("%s/%d", s.Name, small*10)]
			if !ok1 || !ok2 {
				continue
			}
			fmt.Fprintf(&b, "| %s | %d → %d |", s.Name, lo.Reference.Inodes, hi.Reference.Inodes)
			for _, t := range Tools {
				fmt.Fprintf(&b, " %.2f× |", float64(hi.Median[t].MaxRSS)/float64(lo.Median[t].MaxRSS))
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

// machine describes where the figures come from.
func machine(dir string) string {
	var u unix.Utsname
	kernel := "?"
	if unix.Uname(&u) == nil {
		kernel = unix.ByteSliceToString(u.Release[:])
	}
	fsType := "?"
	if out, err := exec.Command("findmnt", "-n", "-o", "FSTYPE", "--target", dir).Output(); err == nil {
		fsType = strings.TrimSpace(string(out))
	}
	duVersion := "?"
	if out, err := exec.Command("du", "--version").Output(); err == nil {
		duVersion, _, _ = strings.Cut(string(out), "\n")
	}
	return fmt.Sprintf("%d CPUs (shared), Linux %s, %s, %s, %s", runtime.NumCPU(), kernel, fsType, duVersion, runtime.Version())
}
