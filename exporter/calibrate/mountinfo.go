package calibrate

import "github.com/emptydir-guard/emptydir-guard/internal/mountinfo"

// mountAt is the mount at point: the last one, which hides those before it.
func mountAt(mounts []mountinfo.Mount, point string) (mountinfo.Mount, bool) {
	for i := len(mounts) - 1; i >= 0; i-- {
		if mounts[i].Point == point {
			return mounts[i], true
		}
	}
	return mountinfo.Mount{}, false
}
