package framework

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/emptydir-guard/emptydir-guard/exporter/part"
	"github.com/emptydir-guard/emptydir-guard/test/cluster"
)

// SeedLimit is the seed pod's sizeLimit (cluster.SeedPod): 1Mi.
const SeedLimit = 1 << 20

// SeedWrite is the seed scenario's write: dd of 10 MB into the 1Mi volume.
type SeedWrite struct {
	Pod     *corev1.Pod
	T0      time.Time // end of the dd exec: the write has crossed the limit
	Du      int64     // du -s -B1 of the volume right after the write
	Tracker *PodTracker
}

// WriteSeed writes kib KiB into the seed pod's volume "empty" (/test/test.file) and measures
// it with du; tr, if any, is the pod's tracker, kept with the write.
func WriteSeed(ctx context.Context, c *cluster.Cluster, pod *corev1.Pod, tr *PodTracker, kib int) (SeedWrite, error) {
	// conv=fsync: the blocks are allocated when dd ends, so du now counts what every later
	// walk counts (delayed allocation may add a block of extent metadata at writeback).
	if err := ddZeros(ctx, c, pod, "/test/test.file", kib, "conv=fsync"); err != nil {
		return SeedWrite{}, err
	}
	w := SeedWrite{Pod: pod, T0: time.Now(), Tracker: tr}
	out, err := DuOf(part.EmptyDirPath(c.KubeletRootDir(), string(pod.UID), "empty"))
	w.Du = out
	return w, err
}

// DeepLevels and DeepNameLen shape WriteDeep's tree: 25 directories of 200-byte names, about
// 5 KB of path below the volume, past PATH_MAX (4096) on the node and in the container.
const (
	DeepLevels  = 25
	DeepNameLen = 200
)

// WriteDeep nests DeepLevels directories of DeepNameLen-byte names in the seed pod's volume
// "empty" and writes kib KiB at the bottom, as a tenant can: each level is entered by a
// relative, physical cd (busybox's logical cd builds the full path and fails past PATH_MAX),
// so no call ever names the whole path. It measures the volume with du like WriteSeed.
func WriteDeep(ctx context.Context, c *cluster.Cluster, pod *corev1.Pod, tr *PodTracker, kib int) (SeedWrite, error) {
	script := fmt.Sprintf(`set -e; cd /test; n=$(printf '%%0%dd' 0 | tr 0 d); i=0
while [ $i -lt %d ]; do mkdir "$n"; cd -P "$n"; i=$((i+1)); done
dd if=/dev/zero of=deep.file bs=1K count=%d conv=fsync`, DeepNameLen, DeepLevels, kib)
	if _, stderr, err := c.ExecInPod(ctx, pod.Namespace, pod.Name, "test2", "sh", "-c", script); err != nil {
		return SeedWrite{}, fmt.Errorf("deep write in %s/%s: %w (%s)", pod.Namespace, pod.Name, err, stderr)
	}
	w := SeedWrite{Pod: pod, T0: time.Now(), Tracker: tr}
	out, err := DuOf(part.EmptyDirPath(c.KubeletRootDir(), string(pod.UID), "empty"))
	w.Du = out
	return w, err
}

// Fill writes kib KiB into the seed pod's volume "empty" (/test/fill), failing the test on error.
func Fill(ctx context.Context, t TB, c *cluster.Cluster, pod *corev1.Pod, kib int) {
	t.Helper()
	if err := ddZeros(ctx, c, pod, "/test/fill", kib); err != nil {
		t.Fatal(err)
	}
}

// ddZeros runs dd of kib KiB of zeros into file in the seed pod's container test2.
func ddZeros(ctx context.Context, c *cluster.Cluster, pod *corev1.Pod, file string, kib int, extra ...string) error {
	args := append([]string{"dd", "if=/dev/zero", "of=" + file, "bs=1K", fmt.Sprint("count=", kib)}, extra...)
	if _, stderr, err := c.ExecInPod(ctx, pod.Namespace, pod.Name, "test2", args...); err != nil {
		return fmt.Errorf("dd in %s/%s: %w (%s)", pod.Namespace, pod.Name, err, stderr)
	}
	return nil
}
