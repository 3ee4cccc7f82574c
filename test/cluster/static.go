package cluster

import (
	"debug/elf"
	"errors"
	"fmt"
)

// ErrDynamicallyLinked marks an executable that needs a dynamic loader and libc, which the
// test images (busybox's, ImportImage's) do not have.
var ErrDynamicallyLinked = errors.New("dynamically linked")

// CheckStatic returns nil for a statically linked ELF executable, an error wrapping
// ErrDynamicallyLinked for one with a program interpreter, and the open error otherwise.
func CheckStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is %w", path, ErrDynamicallyLinked)
		}
	}
	return nil
}
