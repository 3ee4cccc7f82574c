package source

import (
	"github.com/emptydir-guard/emptydir-guard/internal/fswalk"
)

// A file deleted but held open (`exec 3>f; rm f; cat /dev/zero >&3`) keeps its blocks with no
// name leading to it: no walk, ours, du's or the kubelet's, can count it. Where the volume is a
// filesystem of its own (a memory volume's tmpfs, which the kubelet mounts per volume) the
// filesystem's usage counts it, and the part of that usage the volume's names do not explain is
// the held files'. On a disk volume, a folder of the node's filesystem, nothing attributes it.

// namedUsage is what the walk behind du, fswalk.OwnTmpfsUsage's of a filesystem of the volume's
// own, found through its names; nil when that walk failed or is itself a lower bound (it would
// leave part of the usage unexplained). The usage is statfs's all the same: the walk only
// explains it.
func namedUsage(du fswalk.DiskUsage, err error) *fswalk.DiskUsage {
	if err != nil || du.LowerBound() {
		return nil
	}
	du.UsedBytes = du.NamedBytes
	return &du
}

// unexplainedBytes is the usage of the volume's own filesystem that named (nil: unknown) does
// not explain. The filesystem's usage is taken both before the walk (before) and after it
// (space), the smaller: data written or deleted during the walk is then never unexplained.
// before's extended attributes (fswalk.OwnTmpfsUsage adds them to statfs's bytes) are no
// blocks of the filesystem, so they are left out of both sides.
func unexplainedBytes(before fswalk.DiskUsage, space fswalk.Space, named *fswalk.DiskUsage) int64 {
	if named == nil {
		return 0
	}
	used := min(before.UsedBytes-before.XattrBytes, space.CapacityBytes-space.AvailableBytes)
	return max(0, used-(named.UsedBytes-named.XattrBytes))
}
