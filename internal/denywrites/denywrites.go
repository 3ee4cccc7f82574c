// Package denywrites takes from the process, for good, every right to change the filesystem,
// with Landlock (Linux 5.13+, unprivileged): whatever its mounts allow, it may then only read.
// A read-only volume mount is read-only on its top mount only: mounts the node makes later
// below a HostToContainer mount (other containers' root filesystems, tmpfs volumes) reach the
// exporter read-write, and Kubernetes cannot combine recursive read-only with propagation.
package denywrites

import (
	"fmt"

	"github.com/landlock-lsm/go-landlock/landlock"
)

// Apply denies this process and its future children every write to the filesystem below
// "/" (creating, writing, truncating, removing, renaming, linking), keeping every read. The
// first ruleset needs Landlock's ABI 1 and fails without Landlock; the second adds, where the
// kernel has them, the rights later ABIs made restrictable (truncate, refer, device ioctls).
func Apply() error {
	if err := landlock.V1.RestrictPaths(landlock.RODirs("/")); err != nil {
		return fmt.Errorf("landlock: %w", err)
	}
	if err := landlock.V5.BestEffort().RestrictPaths(landlock.RODirs("/")); err != nil {
		return fmt.Errorf("landlock (ABI 5, best effort): %w", err)
	}
	return nil
}
