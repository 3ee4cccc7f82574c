// Command walk-kubelet is the benchmark's child measuring a tree as the kubelet does for an
// emptyDir's volume stats (fs.DiskUsage): walk-kubelet DIRECTORY CONCURRENCY (ignored: the kubelet
// walks with one goroutine).
package main

import (
	"github.com/emptydir-guard/emptydir-guard/test/bench/peers"
	"github.com/emptydir-guard/emptydir-guard/test/bench/walkchild"
)

func main() {
	walkchild.Main(func(root string, _ int) (int64, int64, error) {
		u, err := peers.Kubelet(root)
		return u.Bytes, u.Inodes, err
	})
}
