// Command walk-ours is the benchmark's child measuring a tree with emptyDir guard's walk,
// fswalk.MeasureDiskUsage: walk-ours DIRECTORY CONCURRENCY.
package main

import (
	"context"
	"fmt"

	"github.com/emptydir-guard/emptydir-guard/internal/fswalk"
	"github.com/emptydir-guard/emptydir-guard/test/bench/walkchild"
)

func main() {
	walkchild.Main(func(root string, concurrency int) (int64, int64, error) {
		du, err := fswalk.MeasureDiskUsage(context.Background(), root, fswalk.Options{Concurrency: concurrency})
		if err == nil && (du.Unreadable != 0 || du.UncheckedLinks != 0) {
			// Then the figures are bounds, not what du counts: nothing to compare.
			err = fmt.Errorf("%d unreadable entries, %d unchecked hard links", du.Unreadable, du.UncheckedLinks)
		}
		return du.UsedBytes, du.Inodes, err
	})
}
