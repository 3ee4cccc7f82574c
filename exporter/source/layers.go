package source

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/emptydir-guard/emptydir-guard/exporter/part"
	"github.com/emptydir-guard/emptydir-guard/internal/fswalk"
	"github.com/emptydir-guard/emptydir-guard/internal/mountinfo"
)

// Reasons a running container's writable layer could not be located, as the reason label of
// emptydir_container_writable_layer_unlocated spells them.
const (
	// LayerOtherRuntime: the container's ID names a runtime the exporter has no resolver for:
	// neither containerd, nor CRI-O with --crio.storage-root, nor Docker with --docker.root.
	LayerOtherRuntime = "other_runtime"
	// LayerNoRootfsMount: no root filesystem is mounted for the container where containerd
	// mounts it: another snapshotter mounting elsewhere, or the container has just stopped.
	LayerNoRootfsMount = "no_rootfs_mount"
	// LayerNotOverlay: the root filesystem is no overlay (another snapshotter).
	LayerNotOverlay = "not_overlay"
	// LayerOutsideSnapshotter: the overlay's upper directory is not a snapshot of the
	// overlayfs snapshotter root the exporter was given (--containerd.snapshotter-root).
	LayerOutsideSnapshotter = "outside_snapshotter"
	// LayerNoLayerRecord: the runtime's own metadata names no writable layer for the container
	// (CRI-O's containers.json and volatile-containers.json, or the layer's record missing from
	// layers.json and volatile-layers.json; Docker's layerdb mount record): it has just gone, or
	// the runtime keeps it elsewhere (CRI-O's transient store, Docker's containerd image store).
	LayerNoLayerRecord = "no_layer_record"
	// LayerBadMetadata: the runtime's metadata could not be read or parsed, is over its size cap,
	// or names a layer ID of no form the runtime makes.
	LayerBadMetadata = "bad_layer_metadata"
	// LayerNoLayerDir: the layer the metadata names has no directory directly where the runtime
	// keeps it (<storage-root>/overlay/<layer>/diff, <docker-root>/overlay2/<id>/diff), or a
	// symbolic link or a file there: another storage driver, or the directory not mounted.
	LayerNoLayerDir = "no_layer_dir"
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

// LayerLocator finds a running container's writable layer. With containerd's overlayfs
// snapshotter (the default) containerd mounts each container's root filesystem at
// <task-dir>/<namespace>/<id>/rootfs, an overlay whose upperdir is
// <snapshotter-root>/snapshots/<n>/fs; with its native snapshotter that mount is a bind of
// <native-root>/snapshots/<n>, a whole copy of the image the container writes into. It reads
// both from the mount table, which only the node's root can change: the ID comes from the
// pod's status, which only the kubelet writes, and nothing a tenant controls (its files, its
// pod's spec) chooses the directory walked.
type LayerLocator struct {
	// TaskDir is containerd's runtime v2 task directory as the exporter sees it, with
	// HostToContainer mount propagation in a pod (--containerd.task-dir).
	TaskDir string
	// SnapshotterRoot is the overlayfs snapshotter's root, mounted at the same path as on
	// the node (--containerd.snapshotter-root).
	SnapshotterRoot string
	// NativeSnapshotterRoot is the native snapshotter's root as mounted into the exporter
	// (--containerd.native-snapshotter-root); "": a root filesystem of that snapshotter is
	// not located.
	NativeSnapshotterRoot string
	// CRIContainersDir is the CRI plugin's container directory (containerd's root dir plus
	// io.containerd.grpc.v1.cri/containers) as mounted into the exporter
	// (--containerd.cri-containers-dir), where the directories of image VOLUMEs no Kubernetes
	// mount covers live (ImageVolumes); "": they are not walked.
	CRIContainersDir string
	// Namespace is containerd's namespace of the kubelet's containers: k8s.io.
	Namespace string
	// MountInfo is the mount table to read; empty: /proc/self/mountinfo.
	MountInfo string
	// CRIOStorageRoot is the graph root of CRI-O's containers/storage (storage.conf's graphroot)
	// as mounted into the exporter (--crio.storage-root); "": "cri-o://" containers are
	// reported other_runtime.
	CRIOStorageRoot string
	// DockerRoot is dockerd's data-root as mounted into the exporter (--docker.root), for
	// "docker://" containers (cri-dockerd); "": they are reported other_runtime.
	DockerRoot string

	mu    sync.Mutex
	read  time.Time
	table mountTable
	crio  crioStore
}

// mountTableTTL is how long one reading of the mount table serves: a collection cycle's
// layers are located from one reading, not one each.
const mountTableTTL = time.Second

var (
	snapshotDir       = regexp.MustCompile(`^snapshots/[0-9]+/fs$`)
	nativeSnapshotDir = regexp.MustCompile(`^snapshots/[0-9]+$`)
)

// WritableLayer locates the directory that holds the writable layer of the container with
// runtime ID id ("containerd://…", "cri-o://…", "docker://…").
func (l *LayerLocator) WritableLayer(id string) (string, error) {
	runtime, cid, _ := part.RuntimeID(id)
	// Each runtime makes 64 hex digits; anything else would be a path element of a tenant's
	// choosing, were the kubelet's status not the only writer.
	valid := containerIDPattern.MatchString(cid)
	switch {
	case valid && runtime == "containerd":
		return l.containerdLayer(cid)
	case valid && runtime == "cri-o" && l.CRIOStorageRoot != "":
		return l.crioLayer(cid)
	case valid && runtime == "docker" && l.DockerRoot != "":
		return l.dockerLayer(cid)
	}
	return "", &LayerError{Reason: LayerOtherRuntime, Err: fmt.Errorf("container ID %q is of no runtime whose layers the exporter is given", id)}
}

// containerdLayer locates the writable layer of containerd's container cid from the mount
// table.
func (l *LayerLocator) containerdLayer(cid string) (string, error) {
	ns := l.Namespace
	if ns == "" {
		ns = "k8s.io"
	}
	mountPoint := filepath.Join(l.TaskDir, ns, cid, "rootfs")
	m, native, found, err := l.lookup(mountPoint)
	if err != nil {
		return "", err
	}
	if !found {
		return "", &LayerError{Reason: LayerNoRootfsMount, Err: fmt.Errorf("nothing is mounted at %s", mountPoint)}
	}
	if m.FSType != "overlay" {
		return l.nativeSnapshot(mountPoint, m, native)
	}
	if m.Upper == "" {
		return "", &LayerError{Reason: LayerNotOverlay, Err: fmt.Errorf("%s is no overlay with an upperdir", mountPoint)}
	}
	rel, err := filepath.Rel(l.SnapshotterRoot, filepath.Clean(m.Upper))
	if err != nil || !snapshotDir.MatchString(rel) {
		return "", &LayerError{Reason: LayerOutsideSnapshotter, Err: fmt.Errorf("upperdir %s of %s is no snapshot below %s", m.Upper, mountPoint, l.SnapshotterRoot)}
	}
	return filepath.Join(l.SnapshotterRoot, rel), nil
}

// nativeSnapshot locates a root filesystem m that is no overlay as a native snapshot: a bind
// of <native-root>/snapshots/<n>. The mount table names a bind's source only by its device
// and its path within that filesystem, so m must be on the filesystem that holds
// NativeSnapshotterRoot (native), directly at one of its snapshots.
func (l *LayerLocator) nativeSnapshot(mountPoint string, m mountinfo.Mount, native *mountinfo.Mount) (string, error) {
	if l.NativeSnapshotterRoot == "" || native == nil || m.Device != native.Device {
		return "", &LayerError{Reason: LayerNotOverlay, Err: fmt.Errorf("%s is a %s mount, no overlay nor a native snapshot", mountPoint, m.FSType)}
	}
	rel, err := filepath.Rel(native.Root, filepath.Clean(m.Root))
	if err != nil || !nativeSnapshotDir.MatchString(rel) {
		return "", &LayerError{Reason: LayerOutsideSnapshotter, Err: fmt.Errorf("%s binds %s of its filesystem, no snapshot below %s (%s there)", mountPoint, m.Root, l.NativeSnapshotterRoot, native.Root)}
	}
	return filepath.Join(l.NativeSnapshotterRoot, rel), nil
}

// containerIDPattern is the form of container IDs as containerd's CRI plugin, CRI-O and Docker
// make them.
var containerIDPattern = regexp.MustCompile(`^[0-9a-f]{64}$`)

// lookup gives the mount at mountPoint, and where the native snapshotter's root is (nil when
// not looked for or not found), from a reading of the mount table at most mountTableTTL old;
// a mount point missing from an older reading than the container's start is looked up again.
func (l *LayerLocator) lookup(mountPoint string) (m mountinfo.Mount, native *mountinfo.Mount, found bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for fresh := false; ; fresh = true {
		if l.table.rootfs == nil || time.Since(l.read) > mountTableTTL || fresh {
			if l.table, err = l.readMountTable(); err != nil {
				return mountinfo.Mount{}, nil, false, err
			}
			l.read = time.Now()
			fresh = true
		}
		if m, found = l.table.rootfs[mountPoint]; found || fresh {
			return m, l.table.native, found, nil
		}
	}
}

// readMountTable reads the mounts below TaskDir, and the one holding NativeSnapshotterRoot.
func (l *LayerLocator) readMountTable() (mountTable, error) {
	mounts, err := mountinfo.Read(l.MountInfo)
	if err != nil {
		return mountTable{}, err
	}
	return tableOf(mounts, l.TaskDir, l.NativeSnapshotterRoot), nil
}

// mountTable is the part of a mount table the locator reads.
type mountTable struct {
	rootfs map[string]mountinfo.Mount // by mount point, below the task directory
	// native is the filesystem holding the native snapshotter's root, its root set to that
	// directory's path within the filesystem; nil when none.
	native *mountinfo.Mount
}

// tableOf keeps of a mount table the mounts below under by mount point, and, when nativeRoot
// is set, the deepest mount holding it, to tell its path within its filesystem.
func tableOf(mounts []mountinfo.Mount, under, nativeRoot string) mountTable {
	t := mountTable{rootfs: map[string]mountinfo.Mount{}}
	prefix := filepath.Clean(under) + "/"
	nativeDepth := -1
	for _, m := range mounts {
		// A later mount over the same point hides the earlier one, hence >= and overwrites.
		if nativeRoot != "" && len(m.Point) >= nativeDepth && holds(m.Point, nativeRoot) {
			rel, _ := filepath.Rel(m.Point, nativeRoot)
			n := m
			n.Root = filepath.Join(m.Root, rel)
			t.native, nativeDepth = &n, len(m.Point)
		}
		if strings.HasPrefix(m.Point, prefix) {
			t.rootfs[m.Point] = m
		}
	}
	return t
}

// holds reports whether path is dir or below it.
func holds(dir, path string) bool {
	return dir == path || dir == "/" || strings.HasPrefix(path, dir+"/")
}

// ImageFilesystemDir is a directory mounted into the exporter from the filesystem of the node's
// writable layers: CRI-O's or Docker's layer directory where given (the node's runtime chosen),
// else containerd's snapshotter root. Not CRI-O's or Docker's root itself: only directories below
// it are mounted, so the root is the exporter's own.
func (l *LayerLocator) ImageFilesystemDir() string {
	switch {
	case l.CRIOStorageRoot != "":
		return filepath.Join(l.CRIOStorageRoot, crioDriverDir)
	case l.DockerRoot != "":
		return filepath.Join(l.DockerRoot, dockerDriverDir)
	}
	return l.SnapshotterRoot
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
