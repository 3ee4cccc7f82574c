package exporter

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/emptydir-guard/emptydir-guard/internal/fswalk"
)

// Reasons a running container's writable layer could not be located, as the reason label of
// emptydir_container_writable_layer_unlocated spells them.
const (
	// LayerOtherRuntime: the container's ID names a runtime other than containerd.
	LayerOtherRuntime = "other_runtime"
	// LayerNoRootfsMount: no root filesystem is mounted for the container where containerd
	// mounts it: another snapshotter mounting elsewhere, or the container has just stopped.
	LayerNoRootfsMount = "no_rootfs_mount"
	// LayerNotOverlay: the root filesystem is no overlay (another snapshotter).
	LayerNotOverlay = "not_overlay"
	// LayerOutsideSnapshotter: the overlay's upper directory is not a snapshot of the
	// overlayfs snapshotter root the exporter was given (--containerd.snapshotter-root).
	LayerOutsideSnapshotter = "outside_snapshotter"
)

// LayerError says why a writable layer could not be located.
type LayerError struct {
	Reason string
	Err    error
}

func (e *LayerError) Error() string {
	return fmt.Sprintf("writable layer not located (%s): %v", e.Reason, e.Err)
}
func (e *LayerError) Unwrap() error { return e.Err }

// LayerLocator finds a running container's writable layer with containerd's overlayfs
// snapshotter: containerd mounts each container's root filesystem at
// <task-dir>/<namespace>/<id>/rootfs, an overlay whose upperdir is
// <snapshotter-root>/snapshots/<n>/fs. It reads both from the mount table, which only the
// node's root can change: the ID comes from the pod's status, which only the kubelet writes,
// and nothing a tenant controls (its files, its pod's spec) chooses the folder walked.
type LayerLocator struct {
	// TaskDir is containerd's runtime v2 task folder as the exporter sees it, with
	// HostToContainer mount propagation in a pod (--containerd.task-dir).
	TaskDir string
	// SnapshotterRoot is the overlayfs snapshotter's root, mounted at the same path as on
	// the node (--containerd.snapshotter-root).
	SnapshotterRoot string
	// Namespace is containerd's namespace of the kubelet's containers: k8s.io.
	Namespace string
	// MountInfo is the mount table to read; empty: /proc/self/mountinfo.
	MountInfo string

	mu     sync.Mutex
	read   time.Time
	uppers map[string]string // mount point → upperdir; "" for a mount that is no overlay
}

// mountTableTTL is how long one reading of the mount table serves: a collection cycle's
// layers are located from one reading, not one each.
const mountTableTTL = time.Second

var snapshotDir = regexp.MustCompile(`^snapshots/[0-9]+/fs$`)

// UpperDir locates the writable layer of the container with runtime ID id ("containerd://…").
func (l *LayerLocator) UpperDir(id string) (string, error) {
	runtime, cid, _ := runtimeID(id)
	if runtime != "containerd" || !containerIDPattern.MatchString(cid) {
		return "", &LayerError{Reason: LayerOtherRuntime, Err: fmt.Errorf("container ID %q is not containerd's", id)}
	}
	ns := l.Namespace
	if ns == "" {
		ns = "k8s.io"
	}
	mountPoint := filepath.Join(l.TaskDir, ns, cid, "rootfs")
	upper, found, err := l.lookup(mountPoint)
	if err != nil {
		return "", err
	}
	if !found {
		return "", &LayerError{Reason: LayerNoRootfsMount, Err: fmt.Errorf("nothing is mounted at %s", mountPoint)}
	}
	if upper == "" {
		return "", &LayerError{Reason: LayerNotOverlay, Err: fmt.Errorf("%s is no overlay with an upperdir", mountPoint)}
	}
	rel, err := filepath.Rel(l.SnapshotterRoot, filepath.Clean(upper))
	if err != nil || !snapshotDir.MatchString(rel) {
		return "", &LayerError{Reason: LayerOutsideSnapshotter, Err: fmt.Errorf("upperdir %s of %s is no snapshot below %s", upper, mountPoint, l.SnapshotterRoot)}
	}
	return filepath.Join(l.SnapshotterRoot, rel), nil
}

// containerIDPattern is the form of containerd's container IDs as the CRI plugin makes them.
var containerIDPattern = regexp.MustCompile(`^[0-9a-f]{64}$`)

// lookup gives the upperdir of the overlay mounted at mountPoint from a reading of the mount
// table at most mountTableTTL old; a mount point missing from an older reading than the
// container's start is looked up again.
func (l *LayerLocator) lookup(mountPoint string) (upper string, found bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for fresh := false; ; fresh = true {
		if l.uppers == nil || time.Since(l.read) > mountTableTTL || fresh {
			if l.uppers, err = l.readMountTable(); err != nil {
				return "", false, err
			}
			l.read = time.Now()
			fresh = true
		}
		if upper, found = l.uppers[mountPoint]; found || fresh {
			return upper, found, nil
		}
	}
}

// readMountTable maps the mount points below TaskDir to their overlay upperdir.
func (l *LayerLocator) readMountTable() (map[string]string, error) {
	path := l.MountInfo
	if path == "" {
		path = "/proc/self/mountinfo"
	}
	f, err := os.Open(path) //nolint:gosec // G703: the process's own mount table, or a file a test names; never a request's
	if err != nil {
		return nil, fmt.Errorf("reading the mount table: %w", err)
	}
	defer f.Close()
	return parseOverlayUppers(f, l.TaskDir)
}

// parseOverlayUppers reads a mountinfo table (proc(5)) and maps each mount point below under
// to its overlay upperdir ("" when the mount is no overlay or has none).
func parseOverlayUppers(r io.Reader, under string) (map[string]string, error) {
	out := map[string]string{}
	prefix := filepath.Clean(under) + "/"
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20) // lowerdir lists of many layers make long lines
	for sc.Scan() {
		// 36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, f := range fields {
			if f == "-" && i >= 6 {
				sep = i
				break
			}
		}
		if sep < 0 || len(fields) < sep+4 {
			continue
		}
		mountPoint := unescapeMountinfo(fields[4])
		if !strings.HasPrefix(mountPoint, prefix) {
			continue
		}
		upper := ""
		if fields[sep+1] == "overlay" {
			for _, opt := range strings.Split(fields[sep+3], ",") {
				if v, ok := strings.CutPrefix(opt, "upperdir="); ok {
					upper = unescapeMountinfo(v)
				}
			}
		}
		out[mountPoint] = upper // a later mount over the same point hides the earlier one
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the mount table: %w", err)
	}
	return out, nil
}

// unescapeMountinfo undoes the octal escapes (\040 for a space) of a mountinfo field.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) && isOctal(s[i+1:i+4]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(s string) bool {
	if len(s) != 3 {
		return false
	}
	for i := range 3 {
		if s[i] < '0' || s[i] > '7' {
			return false
		}
	}
	return true
}

// DedicatedImageFilesystem reports whether the container runtime's image filesystem (where
// writable layers live) is another filesystem than the kubelet's root dir, as the kubelet
// judges it: then a container's writable layer does not count toward its own
// ephemeral-storage limit, only toward its pod's (containerEphemeralStorageLimitEviction).
func DedicatedImageFilesystem(snapshotterRoot, kubeletRootDir string) (bool, error) {
	a, err := fswalk.Device(snapshotterRoot)
	if err != nil {
		return false, err
	}
	b, err := fswalk.Device(kubeletRootDir)
	if err != nil {
		return false, err
	}
	return a != b, nil
}
