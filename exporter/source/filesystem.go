package source

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/emptydir-guard/emptydir-guard/exporter/part"
	"github.com/emptydir-guard/emptydir-guard/internal/fswalk"
	"github.com/emptydir-guard/emptydir-guard/internal/openfiles"
)

// Filesystem measures volumes by walking the kubelet's pod volume directories.
// It needs read access to the kubelet root dir (a read-only hostPath mount in the
// DaemonSet) and works whatever the kubelet's own settings are, including nodes
// with localStorageCapacityIsolation off, where the Summary API fails.
type Filesystem struct {
	// KubeletRootDir is the kubelet's --root-dir as seen by the exporter (--kubelet.root-dir).
	KubeletRootDir string
	// WalkConcurrency bounds the directories read at once within one volume (--fs.walk-concurrency).
	WalkConcurrency int
	// ProjectQuotas (--fs.project-quota) reads a volume's usage from its project quota,
	// where the kubelet put it under one of its own, instead of walking it
	// (fswalk.ReadProjectQuota), for pods in a user namespace only (PodVolumes.UserNamespace).
	ProjectQuotas bool
	// PodLogsDir is the kubelet's podLogsDir as mounted into the exporter
	// (--kubelet.pod-logs-dir): the pods' and containers' log files.
	PodLogsDir string
	// Layers locates containers' writable layers; nil: they are not measured (a pod's
	// writable layers then read as unlocated).
	Layers *LayerLocator
	// LayerFallback, when set, gives the usage of a writable layer that cannot be located: the
	// kubelet's Summary API figure (--kubelet.url or --kubelet.via-apiserver with this source),
	// as old as the kubelet's stats (Measurement.Method MethodKubelet, Unlocated still set).
	LayerFallback *Kubelet
	// OpenFiles, when set, adds to a walked emptyDir the files its pod's processes deleted but
	// hold open (--collection.open-files); nil: the usage is a lower bound for them
	// (Measurement.OpenFiles).
	OpenFiles *OpenFiles
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// ReadQuota reads a directory's project quota; nil means fswalk.ReadProjectQuota (tests
	// replace it).
	ReadQuota func(dir string) (fswalk.DiskUsage, error)
}

// DefaultFilesystem returns the filesystem source with the documented defaults, which
// the command's flags show and bind to.
func DefaultFilesystem() Filesystem {
	return Filesystem{KubeletRootDir: "/var/lib/kubelet", PodLogsDir: "/var/log/pods", WalkConcurrency: 4, ProjectQuotas: true,
		Layers: &LayerLocator{
			TaskDir:          "/run/containerd/io.containerd.runtime.v2.task",
			SnapshotterRoot:  "/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs",
			CRIContainersDir: "/var/lib/containerd/io.containerd.grpc.v1.cri/containers",
		}}
}

// MaxWalkConcurrency bounds Filesystem.WalkConcurrency.
const MaxWalkConcurrency = 64

// Name implements Source.
func (s *Filesystem) Name() string { return "filesystem" }

// Validate reports every problem of the settings at once, naming their flags; Config.Validate
// calls it.
func (s *Filesystem) Validate() error {
	var errs []error
	if s.WalkConcurrency < 1 || s.WalkConcurrency > MaxWalkConcurrency {
		errs = append(errs, fmt.Errorf("--fs.walk-concurrency=%d must be between 1 and %d", s.WalkConcurrency, MaxWalkConcurrency))
	}
	if !filepath.IsAbs(s.KubeletRootDir) {
		errs = append(errs, fmt.Errorf("--kubelet.root-dir=%q must be an absolute path", s.KubeletRootDir))
	}
	if s.PodLogsDir != "" && !filepath.IsAbs(s.PodLogsDir) {
		errs = append(errs, fmt.Errorf("--kubelet.pod-logs-dir=%q must be an absolute path", s.PodLogsDir))
	}
	if s.Layers != nil {
		if !filepath.IsAbs(s.Layers.TaskDir) {
			errs = append(errs, fmt.Errorf("--containerd.task-dir=%q must be an absolute path", s.Layers.TaskDir))
		}
		if !filepath.IsAbs(s.Layers.SnapshotterRoot) {
			errs = append(errs, fmt.Errorf("--containerd.snapshotter-root=%q must be an absolute path", s.Layers.SnapshotterRoot))
		}
		if s.Layers.NativeSnapshotterRoot != "" && !filepath.IsAbs(s.Layers.NativeSnapshotterRoot) {
			errs = append(errs, fmt.Errorf("--containerd.native-snapshotter-root=%q must be an absolute path", s.Layers.NativeSnapshotterRoot))
		}
		if s.Layers.CRIContainersDir != "" && !filepath.IsAbs(s.Layers.CRIContainersDir) {
			errs = append(errs, fmt.Errorf("--containerd.cri-containers-dir=%q must be an absolute path", s.Layers.CRIContainersDir))
		}
		if s.Layers.CRIOStorageRoot != "" && !filepath.IsAbs(s.Layers.CRIOStorageRoot) {
			errs = append(errs, fmt.Errorf("--crio.storage-root=%q must be an absolute path", s.Layers.CRIOStorageRoot))
		}
		if s.Layers.DockerRoot != "" && !filepath.IsAbs(s.Layers.DockerRoot) {
			errs = append(errs, fmt.Errorf("--docker.root=%q must be an absolute path", s.Layers.DockerRoot))
		}
	}
	return errors.Join(errs...)
}

// Measure implements Source. Volumes are measured one after another, each walk in
// parallel, so the load on the node stays bounded by WalkConcurrency.
func (s *Filesystem) Measure(ctx context.Context, pods []part.Pod) []part.Result {
	return part.MeasureEach(ctx, pods, s.MeasurePart)
}

// directory is where what v measures lives; "" for a writable layer, which Layers locates.
func (s *Filesystem) directory(p part.Pod, v part.Part) string {
	podDir := filepath.Join(s.KubeletRootDir, "pods", p.KubeletUID())
	_, name, _ := strings.Cut(v.Name, "/")
	switch v.Kind {
	case part.KindConfigMap:
		return filepath.Join(podDir, "volumes", "kubernetes.io~configmap", name)
	case part.KindGitRepo:
		return filepath.Join(podDir, "volumes", "kubernetes.io~git-repo", name)
	case part.KindContainerLogs:
		return s.LogDir(p, v.Container)
	case part.KindPodFiles:
		return podDir
	case part.KindWritableLayer:
		return ""
	default:
		return part.EmptyDirPath(s.KubeletRootDir, p.KubeletUID(), v.Name)
	}
}

// LogDir is where the kubelet keeps the logs of p's container.
func (s *Filesystem) LogDir(p part.Pod, container string) string {
	return filepath.Join(s.podLogs(p), container)
}

// podLogs is the pod's log directory (BuildPodLogsDirectory in pkg/kubelet/kuberuntime): every
// element is a name the API server validated or assigned.
func (s *Filesystem) podLogs(p part.Pod) string {
	return filepath.Join(s.PodLogsDir, p.Namespace+"_"+p.Pod+"_"+p.KubeletUID())
}

// VolumeGone reports whether volume v of pod p has no directory: the kubelet has not set it up
// yet or has torn it down. One lstat, for the volumes a cycle does not walk.
func (s *Filesystem) VolumeGone(p part.Pod, v part.Part) bool {
	dir := s.directory(p, v)
	if dir == "" {
		return false
	}
	_, err := os.Lstat(dir)
	return errors.Is(err, fs.ErrNotExist)
}

// MeasurePart implements Measurer.
func (s *Filesystem) MeasurePart(ctx context.Context, p part.Pod, v part.Part, meter part.Meter) (part.Measurement, error) {
	return s.measurePart(ctx, p, v, false, meter)
}

// MeasurePartLive implements LiveMeasurer: as MeasurePart, but a volume under a
// project quota is walked whatever its quota says (diskUsage).
func (s *Filesystem) MeasurePartLive(ctx context.Context, p part.Pod, v part.Part, meter part.Meter) (part.Measurement, error) {
	return s.measurePart(ctx, p, v, true, meter)
}

// measureVolume measures v of p; live says that the remediator may evict on the answer.
func (s *Filesystem) measurePart(ctx context.Context, p part.Pod, v part.Part, live bool, meter part.Meter) (part.Measurement, error) {
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	started := now()
	dir := s.directory(p, v)
	var du fswalk.DiskUsage
	var method string
	var quotaExcess int64
	var err error
	// unlocated: why the image VOLUME directories of a located writable layer were not walked.
	var unlocated string
	// explained: du is of a filesystem of the volume's own whose complete walk found
	// du.NamedBytes through its names (unexplainedBytes).
	var explained bool
	switch {
	case v.Kind == part.KindWritableLayer:
		if s.Layers == nil {
			return s.unlocatedLayer(ctx, p, v, LayerNoRootfsMount, started, now)
		}
		upper, lerr := s.Layers.WritableLayer(v.ContainerID)
		var le *LayerError
		if errors.As(lerr, &le) {
			return s.unlocatedLayer(ctx, p, v, le.Reason, started, now)
		}
		if lerr != nil {
			return part.Measurement{}, part.FSError(lerr)
		}
		dir = upper
		du, err = fswalk.MeasureDiskUsage(ctx, dir, s.walkOptions(meter))
		method = part.MethodWalk
		if err == nil {
			var vdu fswalk.DiskUsage
			vdu, unlocated, err = s.imageVolumesUsage(ctx, v, meter)
			du = addUsage(du, vdu)
		}
	case v.Kind == part.KindContainerLogs:
		du, err = fswalk.FilesUsage(dir)
		method = part.MethodFiles
	case v.Kind == part.KindPodFiles:
		du, err = s.podFilesUsage(p)
		method = part.MethodFiles
	case v.Kind == part.KindEmptyDir && v.Medium == part.MediumMemory:
		var ok bool
		if du, ok, err = fswalk.OwnTmpfsUsage(ctx, dir, s.walkOptions(meter)); ok {
			method = part.MethodStatfs
			explained = err == nil && !du.LowerBound()
			break
		}
		du, method, quotaExcess, err = s.diskUsage(ctx, dir, p, v, live, meter)
	default:
		du, method, quotaExcess, err = s.diskUsage(ctx, dir, p, v, live, meter)
	}
	// A walk cut short by its deadline still counted something: a lower bound, published
	// as one (Measurement.CutShort), is more than no number at all for a slow volume.
	if err != nil && !du.CutShort {
		return part.Measurement{}, part.FSError(err)
	}
	space, err := fswalk.FilesystemSpace(dir)
	if err != nil {
		return part.Measurement{}, part.FSError(err)
	}
	// A walk of a directory of a shared filesystem misses what was deleted but is held open; a
	// tmpfs of the volume's own and a project quota count it already.
	var open openfiles.Usage
	var openOutcome string
	if v.Kind == part.KindEmptyDir && method == part.MethodWalk {
		open, openOutcome = s.openFiles(ctx, p, v, dir)
	}
	return part.Measurement{
		UsedBytes:          du.UsedBytes + open.Bytes,
		UnlinkedOpenBytes:  open.Bytes,
		OpenFiles:          openOutcome,
		InodesUsed:         du.Inodes + open.Files,
		UnreadableEntries:  du.Unreadable,
		UncheckedLinks:     du.UncheckedLinks,
		ChangedDirectories: du.Changed,
		CutShort:           du.CutShort,
		QuotaExcessBytes:   quotaExcess,
		Method:             method,
		Unlocated:          unlocated,
		CapacityBytes:      space.CapacityBytes,
		AvailableBytes:     space.AvailableBytes,
		UnexplainedBytes:   unexplainedBytes(du, space, explained),
		MeasuredAt:         started,
		CompletedAt:        now(),
	}, nil
}

// unlocatedLayer is the measurement of a writable layer that could not be located, for reason:
// the kubelet's figure, with its time, where LayerFallback is set and has one; else 0. Either
// way a lower bound for the pod's and the container's usage.
func (s *Filesystem) unlocatedLayer(ctx context.Context, p part.Pod, v part.Part, reason string, started time.Time, now func() time.Time) (part.Measurement, error) {
	if s.LayerFallback != nil {
		used, at, ok, err := s.LayerFallback.ContainerRootfs(ctx, p.KubeletUID(), v.Container)
		if err != nil {
			return part.Measurement{}, err
		}
		if ok {
			return part.Measurement{UsedBytes: used, Unlocated: reason, Method: part.MethodKubelet, MeasuredAt: at, CompletedAt: at}, nil
		}
	}
	return part.Measurement{Unlocated: reason, Method: part.MethodNone, MeasuredAt: started, CompletedAt: now()}, nil
}

// imageVolumesUsage walks the image VOLUME directories of the container of writable layer v
// (LayerLocator.ImageVolumes): containerd bind-mounts them into the container beside its root
// filesystem, the kubelet counts them nowhere, and the container writes them as it writes its
// layer, so they count as part of it. Where they cannot be located it says why (a
// LayerError's reason): the layer's usage is then a lower bound.
func (s *Filesystem) imageVolumesUsage(ctx context.Context, v part.Part, meter part.Meter) (fswalk.DiskUsage, string, error) {
	dirs, err := s.Layers.ImageVolumes(v.ContainerID)
	var le *LayerError
	if errors.As(err, &le) {
		return fswalk.DiskUsage{}, le.Reason, nil
	}
	if err != nil {
		return fswalk.DiskUsage{}, "", err
	}
	var sum fswalk.DiskUsage
	for _, dir := range dirs {
		du, err := fswalk.MeasureDiskUsage(ctx, dir, s.walkOptions(meter))
		sum = addUsage(sum, du)
		if err != nil {
			return sum, "", err
		}
	}
	return sum, "", nil
}

// addUsage adds the walks of two directories on no shared hard link (a link(2) across two
// mounts fails, even on one filesystem).
func addUsage(a, b fswalk.DiskUsage) fswalk.DiskUsage {
	return fswalk.DiskUsage{UsedBytes: a.UsedBytes + b.UsedBytes, XattrBytes: a.XattrBytes + b.XattrBytes,
		Inodes: a.Inodes + b.Inodes, Unreadable: a.Unreadable + b.Unreadable, UncheckedLinks: a.UncheckedLinks + b.UncheckedLinks,
		Changed: a.Changed + b.Changed, CutShort: a.CutShort || b.CutShort}
}

// podFilesUsage is the pod's etc-hosts file and the files directly in its log directory, each
// counted as the kubelet counts them (getPodEtcHostsStats and getPodLogStats in
// pkg/kubelet/stats/host_stats_provider.go): either may be missing (a pod mounting its own
// /etc/hosts, a pod whose sandbox is not up yet).
func (s *Filesystem) podFilesUsage(p part.Pod) (fswalk.DiskUsage, error) {
	hosts, err := fswalk.FileUsage(filepath.Join(s.KubeletRootDir, "pods", p.KubeletUID()), "etc-hosts")
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fswalk.DiskUsage{}, err
	}
	logs, err := fswalk.FilesUsage(s.podLogs(p))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fswalk.DiskUsage{}, err
	}
	return fswalk.DiskUsage{UsedBytes: hosts.UsedBytes + logs.UsedBytes, Inodes: hosts.Inodes + logs.Inodes}, nil
}

// walkRetries is how many times a walk that saw directories change is done again
// (fswalk.Options.Retries): once, so that a tenant's one-off move costs it no flag, while
// one racing every walk doubles its walks' cost at most and stays a lower bound.
const walkRetries = 1

// diskUsage measures dir from its project quota when it has one of its own, ProjectQuotas is
// set, the pod runs in a user namespace, the measurement is not live and the quota is over no
// limit of v; else by walking it. It says which, and by how much the quota, read before and
// after a walk (the smaller read, so the volume's own writes during the walk are no excess),
// exceeded it. A walk cut short by ctx returns what it counted, CutShort, with the error.
//
// Any process of the initial user namespace may give the files it owns any project ID: a pod
// with host users may choose its own volume's (so only hostUsers: false volumes are read from
// quotas) or charge another volume's quota (so a quota is an upper bound, never what evicts).
func (s *Filesystem) diskUsage(ctx context.Context, dir string, p part.Pod, v part.Part, live bool, meter part.Meter) (du fswalk.DiskUsage, method string, quotaExcess int64, err error) {
	read := s.ReadQuota
	if read == nil {
		read = fswalk.ReadProjectQuota
	}
	var quota fswalk.DiskUsage
	quotaRead := false
	if s.ProjectQuotas && p.UserNamespace {
		var qerr error
		quota, qerr = read(dir)
		quotaRead = qerr == nil
		if quotaRead && !live && !quotaOverLimit(quota.UsedBytes, v) {
			return quota, part.MethodProjectQuota, 0, nil
		}
	}
	du, err = fswalk.MeasureDiskUsage(ctx, dir, s.walkOptions(meter))
	if err == nil && quotaRead && !du.LowerBound() {
		if after, qerr := read(dir); qerr == nil {
			quotaExcess = max(0, min(quota.UsedBytes, after.UsedBytes)-du.UsedBytes)
		}
	}
	return du, part.MethodWalk, quotaExcess, err
}

// quotaOverLimit reports whether a project quota's answer of used bytes for v is over a limit
// v counts toward (its sizeLimit, the ephemeral-storage limit of its pod): an answer that
// would make it evicted, which only a walk may give.
func quotaOverLimit(used int64, v part.Part) bool {
	_, overSize := part.OverLimit(used, v.LimitBytes)
	_, overBudget := part.OverLimit(used, v.BudgetBytes)
	return overSize || overBudget
}

// walkOptions are the options of every walk of a volume, charged to meter.
func (s *Filesystem) walkOptions(meter part.Meter) fswalk.Options {
	return fswalk.Options{Concurrency: s.WalkConcurrency, Meter: meter, Retries: walkRetries}
}
