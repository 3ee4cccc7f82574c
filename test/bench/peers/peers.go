// Package peers runs the measurements emptyDir guard is compared with: the kubelet's own walk
// (fs.DiskUsage, what it reports as a volume's usage) and GNU du.
package peers

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"

	"k8s.io/kubernetes/pkg/volume/util/fs"
)

// Usage is what a peer reports for one directory.
type Usage struct {
	Bytes  int64
	Inodes int64
}

// Kubelet measures path as the kubelet does for an emptyDir's volume stats.
func Kubelet(path string) (Usage, error) {
	u, err := fs.DiskUsage(path)
	if err != nil {
		return Usage{}, fmt.Errorf("kubelet fs.DiskUsage %s: %w", path, err)
	}
	return Usage{Bytes: u.Bytes, Inodes: u.Inodes}, nil
}

// GNUDu measures path with `du -s -B1 -x` (bytes) and `du -s -x --inodes` (inodes), each one
// process as an operator would run it.
func GNUDu(ctx context.Context, path string) (Usage, error) {
	b, err := duField(ctx, "-s", "-B1", "-x", path)
	if err != nil {
		return Usage{}, err
	}
	i, err := duField(ctx, "-s", "-x", "--inodes", path)
	if err != nil {
		return Usage{}, err
	}
	return Usage{Bytes: b, Inodes: i}, nil
}

// GNUDuBytes runs one `du -s -B1 -x`, the peer of one walk.
func GNUDuBytes(ctx context.Context, path string) (int64, error) {
	return duField(ctx, "-s", "-B1", "-x", path)
}

func duField(ctx context.Context, args ...string) (int64, error) {
	out, err := exec.CommandContext(ctx, "du", args...).Output()
	if err != nil {
		return 0, fmt.Errorf("du %s: %w", strings.Join(args, " "), err)
	}
	f := strings.Fields(string(out))
	if len(f) == 0 {
		return 0, fmt.Errorf("du %s: empty output", strings.Join(args, " "))
	}
	n, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("du %s: %w", strings.Join(args, " "), err)
	}
	return n, nil
}
