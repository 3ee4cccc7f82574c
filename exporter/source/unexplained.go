package source

import (
	"github.com/emptydir-guard/emptydir-guard/internal/fswalk"
)

// A file deleted but held open (`exec 3>f; rm f; cat /dev/zero >&3`) keeps its blocks with no
// name leading to it: no walk, ours, du's or the kubelet's, can count it. Where the volume is a
// filesystem of its own (a memory volume's tmpfs, which the kubelet mounts per volume) the
// filesystem's usage counts it, and the part of that usage the volume's names do not explain is
// the held files'. On a disk volume, a directory of the node's filesystem, nothing attributes it.

// unexplainedBytes is the usage of the volume's own filesystem that the names its walk found
// (du.NamedBytes) do not explain; 0 unless explained (a complete walk: a lower bound would leave
// part of the usage unexplained). The filesystem's usage is taken both before the walk
// (du.UsedBytes) and after it (space), the smaller: data written or deleted during the walk is
// then never unexplained. The extended attributes (fswalk.OwnTmpfsUsage adds them to statfs's
// bytes) are no blocks of the filesystem, so they are left out of both sides.
func unexplainedBytes(du fswalk.DiskUsage, space fswalk.Space, explained bool) int64 {
	if !explained {
		return 0
	}
	used := min(du.UsedBytes-du.XattrBytes, space.CapacityBytes-space.AvailableBytes)
	return max(0, used-(du.NamedBytes-du.XattrBytes))
}
