// Command walkbench compares emptyDir guard's walk with GNU du and the kubelet's fs.DiskUsage
// on generated trees, and writes the result tables into docs/performance.md. `make bench` runs
// it; see docs/performance.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/emptydir-guard/emptydir-guard/internal/docsection"
	"github.com/emptydir-guard/emptydir-guard/test/bench/walk"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "walkbench:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		cacheDir    = flag.String("cache-dir", "/var/tmp/emptydir-guard-bench", "where generated trees are kept between runs")
		sizes       = flag.String("sizes", "10000,100000,1000000", "entries per tree, comma-separated")
		shapes      = flag.String("shapes", "", "tree shapes, comma-separated (default: all)")
		rounds      = flag.Int("rounds", 3, "warm-cache measurements per tool and tree")
		coldRounds  = flag.Int("cold-rounds", 1, "cold-cache measurements per tool and tree (needs root; 0: none)")
		coldMax     = flag.Int("cold-max-entries", 100000, "no cold-cache runs on larger trees")
		concurrency = flag.Int("concurrency", 4, "ours' --fs.walk-concurrency")
		childDir    = flag.String("child-dir", "", "directory holding the built walk-ours, walk-du and walk-kubelet (default: this program's)")
		generate    = flag.Bool("generate-only", false, "generate the trees missing from -cache-dir, measure nothing")
		doc         = flag.String("doc", "", "Markdown file whose section \"walk\" receives the tables (none: print only)")
	)
	flag.Parse()
	if *childDir == "" {
		self, err := os.Executable()
		if err != nil {
			return err
		}
		*childDir = filepath.Dir(self)
	}
	cfg := walk.Config{
		CacheDir: *cacheDir, Rounds: *rounds, ColdRounds: *coldRounds, ColdMaxEntries: *coldMax,
		Runner: walk.Runner{ChildDir: *childDir, Concurrency: *concurrency}, GenerateOnly: *generate, Log: os.Stdout,
	}
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return fmt.Errorf("-sizes: %q is not a number of entries", s)
		}
		cfg.Sizes = append(cfg.Sizes, n)
	}
	if *shapes == "" {
		cfg.Shapes = walk.Shapes
	} else {
		for _, name := range strings.Split(*shapes, ",") {
			s, err := walk.ShapeNamed(strings.TrimSpace(name))
			if err != nil {
				return fmt.Errorf("-shapes: %w", err)
			}
			cfg.Shapes = append(cfg.Shapes, s)
		}
	}
	if cfg.ColdRounds > 0 && os.Geteuid() != 0 {
		fmt.Println("not root: cannot drop the page cache, so no cold-cache runs")
		cfg.ColdRounds = 0
	}
	if err := os.MkdirAll(cfg.CacheDir, 0o755); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := walk.Run(ctx, cfg)
	if err != nil || cfg.GenerateOnly {
		return err
	}
	report := walk.Markdown(cfg, rep)
	if *doc == "" {
		fmt.Println(report)
		return nil
	}
	return docsection.Replace(*doc, "walk", "make bench: test/bench/cmd/walkbench", report)
}
