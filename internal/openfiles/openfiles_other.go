//go:build !linux

package openfiles

import (
	"errors"
	"fmt"
	"syscall"
)

// TargetOf needs Linux (mountinfo).
func TargetOf(dir string) (Target, error) {
	return Target{}, fmt.Errorf("open files of %s: %w", dir, errors.ErrUnsupported)
}

// Count needs Linux (/proc).
func Count(proc string, pids []int, t Target) (Usage, error) {
	return Usage{}, fmt.Errorf("open files: %w", errors.ErrUnsupported)
}

func helperAttr() *syscall.SysProcAttr { return nil }

// InInitialPIDNamespace needs Linux.
func InInitialPIDNamespace() bool { return false }
