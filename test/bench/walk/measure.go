package walk

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/emptydir-guard/emptydir-guard/test/bench/peers"
	"github.com/emptydir-guard/emptydir-guard/test/bench/walkchild"
)

// Tool is one way of measuring a tree.
type Tool string

// The tools compared, in report order.
const (
	Ours    Tool = "ours"    // fswalk.MeasureDiskUsage (cmd/walk-ours)
	GNUDu   Tool = "du"      // du -s -B1 -x
	Kubelet Tool = "kubelet" // the kubelet's fs.DiskUsage (cmd/walk-kubelet)
)

// Tools are the tools of the benchmark, in report order.
var Tools = []Tool{Ours, GNUDu, Kubelet}

// Sample is one measurement of one tree by one tool, in a process of its own. For the Go walks,
// Wall and CPU are measured inside the child around the call, so neither pays for starting a
// Go program; for du, they are those of the whole du process, as an operator runs it.
type Sample = walkchild.Sample

// Runner measures trees with the tools, each measurement in a new process.
type Runner struct {
	// ChildDir holds the built cmd/walk-ours, cmd/walk-du and cmd/walk-kubelet.
	ChildDir string
	// Concurrency is ours' --fs.walk-concurrency.
	Concurrency int
}

// Measure runs tool on root in a new process.
func (r Runner) Measure(ctx context.Context, tool Tool, root string) (Sample, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(r.ChildDir, "walk-"+string(tool)), root, strconv.Itoa(r.Concurrency))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return Sample{}, fmt.Errorf("%s: %w: %s", strings.Join(cmd.Args, " "), err, strings.TrimSpace(stderr.String()))
	}
	var s Sample
	if err := json.Unmarshal(out, &s); err != nil {
		return Sample{}, fmt.Errorf("%s: output %q: %w", strings.Join(cmd.Args, " "), out, err)
	}
	return s, nil
}

// AtRest runs tool's program once without walking anything and returns its peak RSS: the
// footprint of the program itself. It also loads the executable into the page cache, so that a
// cold-cache measurement then reads the tree from disk, not the tool.
func (r Runner) AtRest(ctx context.Context, tool Tool) (int64, error) {
	s, err := r.Measure(ctx, tool, "-")
	return s.MaxRSS, err
}

// Reference is what GNU du says of root, bytes and inodes, which every tool must report.
func Reference(ctx context.Context, root string) (peers.Usage, error) {
	return peers.GNUDu(ctx, root)
}
