// Command dashplot draws each Grafana dashboard of dashboards/ as an SVG picture for the docs,
// from the data a real run's Prometheus answered to its panels (internal/dashboards.Capture,
// written by make dashboard-data): panels at their grid positions, time series with their
// legends, stats and tables, values in their units as Grafana prints them. The same
// dashboards and data give the same bytes. `make dashboard-pictures` runs it, and so does
// `make generate`.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/emptydir-guard/emptydir-guard/internal/dashboards"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "dashplot:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("dashplot", flag.ContinueOnError)
	dir := fs.String("dashboards", "dashboards", "directory of the dashboards (*.json)")
	dataPath := fs.String("data", "docs/img/dashboards/data.json", "the captured data (make dashboard-data)")
	out := fs.String("out", "docs/img/dashboards", "directory the SVG files are written to, one per dashboard")
	if err := fs.Parse(args); err != nil {
		return err
	}
	capture, err := dashboards.ReadCapture(*dataPath)
	if err != nil {
		return err
	}
	paths, err := filepath.Glob(filepath.Join(*dir, "*.json"))
	if err != nil {
		return err
	}
	if len(paths) == 0 {
		return fmt.Errorf("no dashboards (*.json) in %s", *dir)
	}
	// Every picture is drawn before any is written, so a failure leaves the old ones.
	pictures := map[string][]byte{}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		var d dashboard
		if err := json.Unmarshal(data, &d); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		svg, warnings, err := renderDashboard(d, filepath.Base(p), capture)
		if err != nil {
			return err
		}
		for _, w := range warnings {
			fmt.Fprintln(os.Stderr, "dashplot: warning:", w, "(make dashboard-data captures it again)")
		}
		pictures[strings.TrimSuffix(filepath.Base(p), ".json")+".svg"] = svg
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	for _, p := range paths {
		name := strings.TrimSuffix(filepath.Base(p), ".json") + ".svg"
		if err := os.WriteFile(filepath.Join(*out, name), pictures[name], 0o644); err != nil {
			return err
		}
	}
	return nil
}
