// Package calibrate checks the exporter's settings of the node's layout (the kubelet's root and
// pod logs directories, its cgroup root and driver, containerd's task and snapshotter directories)
// against the exporter's own pod, whose every part it knows: where a setting is wrong, the
// exporter's own emptyDir, log directory, cgroup or writable layer is not where the setting says,
// and the node often says where it is instead.
//
// Only what the node's root controls decides: the mount table (/proc/self/mountinfo), stat of
// directories, the cgroup tree, and the pod's status, which only the kubelet writes. No file a
// tenant can write is read. docs/deploy.md ("Calibration") lists the reasons and the chart
// value each names.
package calibrate

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/emptydir-guard/emptydir-guard/exporter/part"
	"github.com/emptydir-guard/emptydir-guard/exporter/source"
	"github.com/emptydir-guard/emptydir-guard/internal/mountinfo"
	"github.com/emptydir-guard/emptydir-guard/internal/podcgroup"
)

// The settings checked, by their flag names.
const (
	SettingKubeletRootDir  = "kubelet.root-dir"
	SettingPodLogsDir      = "kubelet.pod-logs-dir"
	SettingCgroupMount     = "cgroup.mount"
	SettingCgroupRoot      = "cgroup.root"
	SettingCgroupDriver    = "cgroup.driver"
	SettingTaskDir         = "containerd.task-dir"
	SettingSnapshotterRoot = "containerd.snapshotter-root"
	SettingCRIOStorageRoot = "crio.storage-root"
	SettingDockerRoot      = "docker.root"
)

// Reasons of a mismatch. The writable layer's pass source's reasons through
// (source.LayerNoRootfsMount, source.LayerOutsideSnapshotter, source.LayerNotOverlay).
const (
	// ReasonOwnPodNotFound: the exporter's own emptyDir, log directory, cgroup or writable layer is
	// not where the setting says.
	ReasonOwnPodNotFound = "own_pod_not_found"
	// ReasonOtherDirectory: a directory is where the setting says, but not the exporter's own (another
	// kubelet's root on the same node, an empty directory a hostPath created).
	ReasonOtherDirectory = "other_directory"
	// ReasonAmbiguous: the pod has a cgroup in both layouts (--cgroup.driver=auto).
	ReasonAmbiguous = "ambiguous"
	// ReasonUnreadable: what the check reads could not be read.
	ReasonUnreadable = "unreadable"
	// ReasonNotSet: the exporter's own container runs under a runtime whose root is not set
	// (--crio.storage-root, --docker.root), so none of that runtime's layers is located.
	ReasonNotSet = "not_set"
)

// Reasons a check did not run.
const (
	// SkipSourceKubelet: the kubelet source reads no directory of the node.
	SkipSourceKubelet = "source_kubelet"
	// SkipNotConfigured: the setting is not in use (its measurement or feature is off).
	SkipNotConfigured = "not_configured"
	// SkipNoOwnPod: the exporter does not know its own pod (POD_NAME, POD_NAMESPACE, POD_UID
	// and --calibration.dir, an emptyDir of its own).
	SkipNoOwnPod = "no_own_pod"
	// SkipOtherRuntime: the exporter's container runs under a runtime without a layer locator
	// (neither containerd, CRI-O nor Docker).
	SkipOtherRuntime = "other_runtime"
	// SkipNotOverlay: the exporter's own root filesystem is no overlay (another snapshotter).
	SkipNotOverlay = "not_overlay"
)

// Pod is what the exporter knows of its own pod: from the API server (its status, written by
// the kubelet) and the downward API.
type Pod struct {
	Namespace, Name, UID, QOSClass string
	// ContainerID is the runtime ID ("containerd://…") of the container the exporter runs in.
	ContainerID string
	// Container is that container's name.
	Container string
	// Volume is the name of an emptyDir of the pod's, mounted in that container at VolumeDir.
	Volume, VolumeDir string
}

// Settings are the exporter's settings to check, as the exporter sees the node's directories.
type Settings struct {
	// KubeletRootDir is --kubelet.root-dir, as mounted into the exporter; "": not checked.
	KubeletRootDir string
	// PodLogsDir is --kubelet.pod-logs-dir; "": not checked.
	PodLogsDir string
	// Layers locates writable layers (--containerd.*); nil: not checked.
	Layers *source.LayerLocator
	// Cgroup is --cgroup.*, Root possibly podcgroup.RootAuto; nil: not checked.
	Cgroup *podcgroup.Config
	// OpenCgroups opens the cgroup hierarchy; nil: podcgroup.Open (tests give fake trees).
	OpenCgroups func(podcgroup.Config) (*podcgroup.Locator, error)
	// MountInfo is the mount table to read; "": /proc/self/mountinfo.
	MountInfo string
}

// Layout is the node's layout as found on the exporter's own pod; "" where not found. Paths are
// the node's.
type Layout struct {
	KubeletRootDir, PodLogsDir                   string
	CgroupVersion, CgroupDriver, CgroupRoot      string
	ContainerdTaskDir, ContainerdSnapshotterRoot string
	// ContainerRuntime is the runtime of the exporter's own container: containerd, cri-o or
	// docker (its container ID's scheme).
	ContainerRuntime            string
	CRIOStorageRoot, DockerRoot string
}

// setRuntimeRoot records root, found above the exporter's own writable layer, as runtime's.
func (l *Layout) setRuntimeRoot(runtime, root string) {
	switch runtime {
	case "containerd":
		l.ContainerdSnapshotterRoot = root
	case "cri-o":
		l.CRIOStorageRoot = root
	case "docker":
		l.DockerRoot = root
	}
}

// Mismatch is a setting the exporter's own pod contradicts.
type Mismatch struct {
	Setting, Reason string
	// Found is the value to set, where the node shows it; "" otherwise.
	Found string
	Err   error
}

// Skip is a check that did not run, and why.
type Skip struct{ Setting, Reason string }

// Result is one calibration.
type Result struct {
	Layout     Layout
	Mismatches []Mismatch
	Skipped    []Skip
}

// Check checks every setting s has against the exporter's own pod p; a nil p skips them all.
func Check(p *Pod, s Settings) Result {
	var r Result
	settings := []struct {
		name string
		on   bool
	}{{SettingKubeletRootDir, s.KubeletRootDir != ""}, {SettingPodLogsDir, s.PodLogsDir != ""},
		{SettingCgroupRoot, s.Cgroup != nil}, {SettingSnapshotterRoot, s.Layers != nil}}
	for _, c := range settings {
		switch {
		case !c.on:
			r.Skipped = append(r.Skipped, Skip{c.name, SkipNotConfigured})
		case p == nil:
			r.Skipped = append(r.Skipped, Skip{c.name, SkipNoOwnPod})
		}
	}
	if p == nil {
		return r
	}
	mounts, merr := mountinfo.Read(s.MountInfo)
	if s.KubeletRootDir != "" {
		r.checkKubeletRoot(p, s.KubeletRootDir, mounts)
	}
	if s.PodLogsDir != "" {
		r.checkPodLogs(p, s.PodLogsDir)
	}
	if s.Cgroup != nil {
		open := s.OpenCgroups
		if open == nil {
			open = podcgroup.Open
		}
		r.checkCgroup(p, *s.Cgroup, open)
	}
	if s.Layers != nil {
		r.checkLayer(p, s.Layers, mounts, merr)
	}
	return r
}

func (r *Result) mismatch(setting, reason, found string, err error) {
	r.Mismatches = append(r.Mismatches, Mismatch{Setting: setting, Reason: reason, Found: found, Err: err})
}

// checkKubeletRoot: the exporter's emptyDir, seen in its container and through the kubelet root
// mount, must be one directory. The node's root comes from the mount table: the emptyDir's bind
// names its directory (the node's path where that filesystem is the node's root filesystem).
func (r *Result) checkKubeletRoot(p *Pod, root string, mounts []mountinfo.Mount) {
	suffix := strings.TrimPrefix(part.EmptyDirPath("/", p.UID, p.Volume), "/")
	found := ""
	if m, ok := mountAt(mounts, p.VolumeDir); ok {
		if prefix, ok := strings.CutSuffix(m.Root, "/"+suffix); ok {
			found = cmp.Or(prefix, "/")
		}
	}
	r.Layout.KubeletRootDir = found
	own, err := os.Stat(p.VolumeDir)
	if err != nil {
		r.mismatch(SettingKubeletRootDir, ReasonUnreadable, found, fmt.Errorf("the exporter's own emptyDir %s: %w", p.Volume, err))
		return
	}
	viaRoot := part.EmptyDirPath(root, p.UID, p.Volume)
	fi, err := os.Stat(viaRoot)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		r.mismatch(SettingKubeletRootDir, ReasonOwnPodNotFound, found, fmt.Errorf("the exporter's own emptyDir %s is not at %s: %w", p.Volume, viaRoot, err))
	case err != nil:
		r.mismatch(SettingKubeletRootDir, ReasonUnreadable, found, err)
	case !os.SameFile(own, fi):
		r.mismatch(SettingKubeletRootDir, ReasonOtherDirectory, found, fmt.Errorf("%s is not the exporter's own emptyDir %s (mounted at %s)", viaRoot, p.Volume, p.VolumeDir))
	}
}

// checkPodLogs: the kubelet writes the exporter's own logs to <dir>/<ns>_<name>_<uid>/<container>.
func (r *Result) checkPodLogs(p *Pod, dir string) {
	logs := filepath.Join(dir, p.Namespace+"_"+p.Name+"_"+p.UID, p.Container)
	fi, err := os.Stat(logs)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		r.mismatch(SettingPodLogsDir, ReasonOwnPodNotFound, "", fmt.Errorf("the exporter's own log directory is not at %s: %w", logs, err))
	case err != nil:
		r.mismatch(SettingPodLogsDir, ReasonUnreadable, "", err)
	case !fi.IsDir():
		r.mismatch(SettingPodLogsDir, ReasonOtherDirectory, "", fmt.Errorf("%s is no directory", logs))
	default:
		r.Layout.PodLogsDir = dir
	}
}

// checkCgroup locates the exporter's own pod cgroup where the settings say; where it is not
// there (or the root is auto), it searches the tree and names the root and driver that put it
// where it is.
func (r *Result) checkCgroup(p *Pod, cfg podcgroup.Config, open func(podcgroup.Config) (*podcgroup.Locator, error)) {
	auto := cfg.Root == podcgroup.RootAuto
	openCfg := cfg
	if auto {
		openCfg.Root = "/" // any: Find does not use it
	}
	l, err := open(openCfg)
	if err != nil {
		r.mismatch(SettingCgroupMount, ReasonUnreadable, "", err)
		return
	}
	r.Layout.CgroupVersion = fmt.Sprint(int(l.Version()))
	if !auto {
		pod, err := l.Locate(p.UID, p.QOSClass)
		if err == nil {
			r.Layout.CgroupDriver, r.Layout.CgroupRoot = string(pod.Driver), cfg.Root
			return
		}
		var e *podcgroup.Error
		if errors.As(err, &e) && e.Reason == podcgroup.ReasonAmbiguous {
			r.mismatch(SettingCgroupDriver, ReasonAmbiguous, "", err)
			return
		}
		if !podcgroup.IsNotFound(err) {
			r.mismatch(SettingCgroupRoot, ReasonUnreadable, "", err)
			return
		}
	}
	f, err := l.Find(p.UID, p.QOSClass)
	if err != nil {
		var e *podcgroup.Error
		switch {
		case errors.As(err, &e) && e.Reason == podcgroup.ReasonAmbiguous:
			r.mismatch(SettingCgroupDriver, ReasonAmbiguous, "", err)
		case podcgroup.IsNotFound(err):
			r.mismatch(SettingCgroupRoot, ReasonOwnPodNotFound, "", err)
		default:
			r.mismatch(SettingCgroupRoot, ReasonUnreadable, "", err)
		}
		return
	}
	r.Layout.CgroupDriver, r.Layout.CgroupRoot = string(f.Driver), f.Root
	if !auto && f.Root != cfg.Root {
		r.mismatch(SettingCgroupRoot, ReasonOwnPodNotFound, f.Root, fmt.Errorf("the exporter's own pod cgroup is at %s, below root %s", f.Dir, f.Root))
	}
	if cfg.Driver != "" && cfg.Driver != podcgroup.DriverAuto && cfg.Driver != f.Driver {
		r.mismatch(SettingCgroupDriver, ReasonOwnPodNotFound, string(f.Driver), fmt.Errorf("the exporter's own pod cgroup is at %s, in the %s layout", f.Dir, f.Driver))
	}
}

// layerRuntime is how the exporter's own container checks the settings that locate writable
// layers under one runtime.
type layerRuntime struct {
	// setting is the flag naming the runtime's root; configured says whether it is set.
	setting    string
	configured func(*source.LayerLocator) bool
	// upper matches the upperdir of a root filesystem of this runtime; its group is the root.
	upper *regexp.Regexp
	// relative is the part of the root's path an upperdir without it starts from (CRI-O may
	// mount with upperdirs relative to its overlay directory); "": upperdirs are absolute.
	relative string
}

var layerRuntimes = map[string]layerRuntime{
	"containerd": {setting: SettingSnapshotterRoot, configured: func(*source.LayerLocator) bool { return true },
		upper: regexp.MustCompile(`^(/.*)/snapshots/[0-9]+/fs$`)},
	"cri-o": {setting: SettingCRIOStorageRoot, configured: func(l *source.LayerLocator) bool { return l.CRIOStorageRoot != "" },
		upper: regexp.MustCompile(`^(/.*)/overlay/[0-9a-f]{64}/diff$`), relative: "overlay"},
	"docker": {setting: SettingDockerRoot, configured: func(l *source.LayerLocator) bool { return l.DockerRoot != "" },
		upper: regexp.MustCompile(`^(/.*)/overlay2/[0-9a-f]{64}/diff$`)},
}

// checkLayer: the writable layer the locator finds for the exporter's own container must be
// the upperdir of its own root filesystem, and be there. Under containerd that checks the task
// directory (where the locator finds the container's rootfs mount) and the snapshotter root
// together; under CRI-O and Docker the root whose metadata names the layer.
func (r *Result) checkLayer(p *Pod, l *source.LayerLocator, mounts []mountinfo.Mount, merr error) {
	name, _, _ := part.RuntimeID(p.ContainerID)
	rt, known := layerRuntimes[name]
	if !known {
		r.Skipped = append(r.Skipped, Skip{SettingSnapshotterRoot, SkipOtherRuntime})
		return
	}
	r.Layout.ContainerRuntime = name
	if merr != nil {
		r.mismatch(rt.setting, ReasonUnreadable, "", merr)
		return
	}
	own, ok := mountAt(mounts, "/")
	if !ok || own.FSType != "overlay" || own.Upper == "" {
		r.Skipped = append(r.Skipped, Skip{rt.setting, SkipNotOverlay})
		return
	}
	upper := filepath.Clean(own.Upper)
	found := ""
	if m := rt.upper.FindStringSubmatch(upper); m != nil {
		found = m[1]
	}
	r.Layout.setRuntimeRoot(name, found)
	if !rt.configured(l) {
		r.mismatch(rt.setting, ReasonNotSet, found, fmt.Errorf("the exporter's own container runs under %s, whose root is not set: no %s container's writable layer is located", name, name))
		return
	}
	layer, err := l.WritableLayer(p.ContainerID)
	if err != nil {
		r.layerError(rt.setting, found, err)
		return
	}
	if name == "containerd" {
		r.Layout.ContainerdTaskDir = l.TaskDir
	}
	if !sameLayer(layer, upper, rt.relative) {
		r.mismatch(rt.setting, ReasonOtherDirectory, found, fmt.Errorf("the locator finds %s, the exporter's own root filesystem writes to %s", layer, own.Upper))
		return
	}
	// The directory must be there too: a root not mounted into the exporter reads as empty (or as
	// a directory a DirectoryOrCreate hostPath created).
	if _, err := os.Stat(layer); err != nil {
		r.mismatch(rt.setting, ReasonOwnPodNotFound, found, fmt.Errorf("the exporter's own writable layer: %w", err))
	}
}

// layerError names the setting the locator's error for the exporter's own container points at:
// under containerd, a missing rootfs mount is the task directory's, an upperdir outside the
// snapshotter its root's; under the other runtimes, every error is their root's.
func (r *Result) layerError(setting, found string, err error) {
	var le *source.LayerError
	switch {
	case !errors.As(err, &le):
		if setting == SettingSnapshotterRoot {
			setting = SettingTaskDir
		}
		r.mismatch(setting, ReasonUnreadable, "", err)
	case setting == SettingSnapshotterRoot && le.Reason != source.LayerOutsideSnapshotter:
		r.mismatch(SettingTaskDir, le.Reason, "", err)
	default:
		r.mismatch(setting, le.Reason, found, err)
	}
}

// sameLayer: the locator's layer is the upperdir, which may be relative to the runtime's
// directory named relative.
func sameLayer(layer, upper, relative string) bool {
	if filepath.IsAbs(upper) || relative == "" {
		return layer == upper
	}
	return strings.HasSuffix(layer, "/"+filepath.Join(relative, upper))
}

// SkipAll is the Result of a calibration that checks nothing, for reason.
func SkipAll(reason string) Result {
	var r Result
	for _, s := range []string{SettingKubeletRootDir, SettingPodLogsDir, SettingCgroupRoot, SettingSnapshotterRoot} {
		r.Skipped = append(r.Skipped, Skip{s, reason})
	}
	return r
}
