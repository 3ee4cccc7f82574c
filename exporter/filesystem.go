package exporter

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// FilesystemSource measures volumes by walking the kubelet's pod volume folders.
// It needs read access to the kubelet root dir (a read-only hostPath mount in the
// DaemonSet) and works whatever the kubelet's own settings are, including nodes
// with localStorageCapacityIsolation off, where the Summary API fails.
type FilesystemSource struct {
	// KubeletRootDir is the kubelet's --root-dir as seen by the exporter.
	KubeletRootDir string
	// WalkConcurrency bounds the folders read at once within one volume.
	WalkConcurrency int
	// ProjectQuotas reads a volume's usage from its project quota, where the kubelet put it
	// under one of its own, instead of walking it (readProjectQuota).
	ProjectQuotas bool
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Name implements Source.
func (s *FilesystemSource) Name() string { return "filesystem" }

// Measure implements Source. Volumes are measured one after another, each walk in
// parallel, so the load on the node stays bounded by WalkConcurrency.
func (s *FilesystemSource) Measure(ctx context.Context, pods []PodVolumes) []VolumeResult {
	return measureEach(ctx, pods, s.MeasureVolume)
}

// MeasureVolume implements VolumeSource.
// VolumeGone reports whether volume v of pod p has no folder: the kubelet has not set it up
// yet or has torn it down. One lstat, for the volumes a cycle does not walk.
func (s *FilesystemSource) VolumeGone(p PodVolumes, v Volume) bool {
	_, err := os.Lstat(Dir(s.KubeletRootDir, p.KubeletUID(), v.Name))
	return errors.Is(err, fs.ErrNotExist)
}

func (s *FilesystemSource) MeasureVolume(ctx context.Context, p PodVolumes, v Volume) (Measurement, error) {
	dir := Dir(s.KubeletRootDir, p.KubeletUID(), v.Name)
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	started := now()
	du, method, err := s.diskUsage(ctx, dir)
	if err != nil {
		return Measurement{}, fsError(err)
	}
	var sfs unix.Statfs_t
	if err := unix.Statfs(dir, &sfs); err != nil {
		return Measurement{}, fsError(&fs.PathError{Op: "statfs", Path: dir, Err: err})
	}
	return Measurement{
		UsedBytes:         du.UsedBytes,
		InodesUsed:        du.Inodes,
		UnreadableEntries: du.Unreadable,
		UncheckedLinks:    du.UncheckedLinks,
		Method:            method,
		CapacityBytes:     int64(sfs.Blocks) * sfs.Bsize,
		AvailableBytes:    int64(sfs.Bavail) * sfs.Bsize,
		MeasuredAt:        started,
		CompletedAt:       now(),
	}, nil
}

// diskUsage measures dir from its project quota when it has one of its own and
// ProjectQuotas is set, else by walking it; it says which.
func (s *FilesystemSource) diskUsage(ctx context.Context, dir string) (DiskUsage, string, error) {
	if s.ProjectQuotas {
		if du, err := readProjectQuota(dir); err == nil {
			return du, MethodProjectQuota, nil
		}
	}
	du, err := MeasureDiskUsage(ctx, dir, s.WalkConcurrency)
	return du, MethodWalk, err
}
