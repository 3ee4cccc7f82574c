//go:build !linux

package podcgroup

import (
	"errors"
	"fmt"
)

// detectHierarchy needs Linux (statfs magic numbers).
func detectHierarchy(mount string) (Version, string, error) {
	return 0, "", fmt.Errorf("cgroups at %s: %w", mount, errors.ErrUnsupported)
}

// dirID needs Linux here (inode numbers).
func dirID(dir string) (uint64, error) {
	return 0, fmt.Errorf("cgroup %s: %w", dir, errors.ErrUnsupported)
}

// WritebackCharged needs Linux.
func WritebackCharged(dir string) (bool, error) {
	return false, fmt.Errorf("statfs %s: %w", dir, errors.ErrUnsupported)
}

// MediumOf needs Linux.
func MediumOf(dir string) (Medium, error) {
	return Disk, fmt.Errorf("statfs %s: %w", dir, errors.ErrUnsupported)
}
