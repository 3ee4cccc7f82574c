// Command walk-du is the benchmark's child measuring a tree with GNU du as an operator runs it,
// `du -s -B1 -x DIRECTORY`, process start included: walk-du DIRECTORY CONCURRENCY (ignored). It is
// the launcher that keeps du's peak RSS du's own (see package walkchild).
package main

import "github.com/emptydir-guard/emptydir-guard/test/bench/walkchild"

func main() {
	walkchild.MainCommand(func(root string) []string {
		if root == "-" {
			return []string{"du", "--version"}
		}
		return []string{"du", "-s", "-B1", "-x", root}
	})
}
