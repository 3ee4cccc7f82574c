//go:build !linux

package fswalk

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// MeasureDiskUsage needs Linux (statx, getdents64, openat).
func MeasureDiskUsage(_ context.Context, root string, _ Options) (DiskUsage, error) {
	return DiskUsage{}, fmt.Errorf("walking %s: %w", root, errors.ErrUnsupported)
}

// ReadProjectQuota needs Linux (FS_IOC_FSGETXATTR, quotactl_fd).
func ReadProjectQuota(dir string) (DiskUsage, error) {
	return DiskUsage{}, fmt.Errorf("project quota of %s: %w", dir, errors.ErrUnsupported)
}

// FilesystemSpace needs Linux here: statfs differs from one system to the next.
func FilesystemSpace(dir string) (Space, error) {
	return Space{}, fmt.Errorf("statfs %s: %w", dir, errors.ErrUnsupported)
}

// ProcessCPU needs Linux here (getrusage's fields differ from one system to the next).
func ProcessCPU() (time.Duration, error) {
	return 0, fmt.Errorf("getrusage: %w", errors.ErrUnsupported)
}

// FilesUsage needs Linux here (fstatat's fields differ from one system to the next).
func FilesUsage(dir string) (DiskUsage, error) {
	return DiskUsage{}, fmt.Errorf("files of %s: %w", dir, errors.ErrUnsupported)
}

// FileUsage needs Linux here.
func FileUsage(dir, name string) (DiskUsage, error) {
	return DiskUsage{}, fmt.Errorf("file %s of %s: %w", name, dir, errors.ErrUnsupported)
}

// OwnTmpfsUsage needs Linux (statfs's f_type).
func OwnTmpfsUsage(_ context.Context, dir string, _ Options) (DiskUsage, bool, error) {
	return DiskUsage{}, false, nil
}

// Device needs Linux here (stat's st_dev differs in type from one system to the next).
func Device(path string) (uint64, error) {
	return 0, fmt.Errorf("device of %s: %w", path, errors.ErrUnsupported)
}
