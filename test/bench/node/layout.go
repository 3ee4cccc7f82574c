// Package node benchmarks the exporter on one busy node: 110 pods, 1M files in all across
// their emptyDirs (3 each, only some with a sizeLimit) and their containers' writable layers
// (one container each), half the pods with an ephemeral-storage limit, whose writable layers,
// logs and pod files the exporter then measures too, under a fake kubelet root dir, pod logs
// dir and containerd (a mount table naming each container's overlay).
//
// BenchmarkNode (make bench-node) reads these environment variables:
//
//	EMPTYDIR_GUARD_BENCH_DIR         where the generated trees are kept (default /var/tmp/emptydir-guard-bench)
//	EMPTYDIR_GUARD_BENCH_STEADY      how long each exporter is measured (default and minimum 2m; 40s small)
//	EMPTYDIR_GUARD_BENCH_CPUPROFILE  a file for the CPU profile of the defaults' measured window
//	EMPTYDIR_GUARD_BENCH_SMALL=1     a quick check of the code, not of the figures: the same pods
//	                                 and parts with a hundredth of the files and bytes, 15s of
//	                                 warm-up, and the table logged, not written to the docs
//
// TestLayout runs the layout's first pods at a thousandth of the files through one collection
// cycle, as a short test.
package node

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/emptydir-guard/emptydir-guard/exporter/part"
	"github.com/emptydir-guard/emptydir-guard/exporter/source"
)

// layoutVersion names the generated tree; change it when the layout changes, so that a tree
// cached on disk by an earlier run is generated again.
const layoutVersion = "node-v2"

const (
	pods          = 110
	filesPerDir   = 100
	namespace     = "bench"
	uidPrefix     = "0b5e4c1d-0000-4000-8000-"
	limitedVolume = "scratch"
	container     = "app"
)

// volumeSpec is one emptyDir of a pod: how many files it holds and its sizeLimit (0: none).
type volumeSpec struct {
	name  string
	files int
	limit int64
}

// podSpec is one pod of the node: its emptyDirs, its one container's writable layer (files,
// one of them of bigBytes when above 0) and log files (sizes: 0.log, then the rotated ones),
// and the container's ephemeral-storage limit (0: none; the pod's limit is the same).
type podSpec struct {
	index      int
	volumes    []volumeSpec
	layerFiles int
	bigBytes   int64
	logBytes   []int64
	limit      int64
}

func (p podSpec) name() string { return fmt.Sprintf("app-%03d", p.index) }
func (p podSpec) uid() string  { return fmt.Sprintf("%s%012d", uidPrefix, p.index) }

// containerID is the runtime ID of the pod's container, as its status gives it.
func (p podSpec) containerID() string {
	sum := sha256.Sum256([]byte(p.name()))
	return "containerd://" + hex.EncodeToString(sum[:])
}

// nodeLayout is the node, with every file count and file size divided by scale (1: the
// benchmark's node; at least one file each).
//
// emptyDirs (820,000 files): per pod a "scratch" volume with a sizeLimit (small, as scratch
// space is), a "cache" and a "data" volume without one, where the bulk of the files sit; every
// tenth pod's cache has a sizeLimit too. A few volumes are big (30k files), most are small.
//
// Writable layers (180,000 files): every pod runs one container, whose writable layer holds
// what it wrote outside its volumes (caches, temporary files): 1,000 files, 8,000 for every
// eleventh pod. Two pods near their limit hold a 160 MiB file there too (a download).
//
// Logs: each container's 0.log (64 to 512 KiB) and two rotated files (1 MiB, and 256 KiB
// compressed), as the kubelet's rotation leaves them; the pod's etc-hosts.
//
// Ephemeral-storage limits: every other pod (55), its container with a limit of 2 GiB, 256 MiB
// for the two near it. Half, because clusters differ the most here: where tenant namespaces get a
// LimitRange default (or a policy asks for limits) the tenants' pods have one and the platform's
// daemons and operators do not; some managed offerings set one on every pod, many clusters on
// none. Every part of such a pod counts toward the limit and is guarded (walked every cycle),
// its emptyDirs included; the writable layers of the other pods are not measured at all.
func nodeLayout(scale int) []podSpec {
	div := func(n int) int { return max(1, n/scale) }
	var out []podSpec
	for i := range pods {
		p := podSpec{index: i}
		scratch := volumeSpec{name: limitedVolume, files: 600, limit: 64 << 20}
		cache := volumeSpec{name: "cache", files: 1500}
		data := volumeSpec{name: "data", files: 1050}
		switch {
		case i < 10: // the big ones
			data.files = 30000
		case i < 50:
			data.files = 4000
		}
		if i%10 == 0 {
			cache.limit, cache.files = 256<<20, 7500
		}
		for _, v := range []volumeSpec{scratch, cache, data} {
			v.files = div(v.files)
			p.volumes = append(p.volumes, v)
		}
		p.layerFiles = div(1000)
		if i%11 == 3 {
			p.layerFiles = div(8000)
		}
		p.logBytes = []int64{int64(i%8+1) << 16 / int64(scale), 1 << 20 / int64(scale), 256 << 10 / int64(scale)}
		if i%2 == 0 {
			p.limit = 2 << 30
		}
		if i == 10 || i == 60 {
			p.limit, p.bigBytes = 256<<20, 160<<20/int64(scale)
		}
		out = append(out, p)
	}
	return out
}

// class is what the benchmark tells measurements apart by: what they measure and what makes
// them due.
type class int

const (
	classSizeLimit class = iota // an emptyDir with a sizeLimit
	classPodLimit               // an emptyDir without one, in a pod with an ephemeral-storage limit
	classUnguarded              // an emptyDir of neither: only walked every --collection.unlimited-interval
	classLayer                  // a container's writable layer (pods with a limit)
	classLogs                   // a container's log files (pods with a limit)
	classPodFiles               // etc-hosts and the pod's own log files (pods with a limit)
	numClasses
)

var classNames = [numClasses]string{
	"emptyDirs with a sizeLimit", "emptyDirs under a pod limit only", "emptyDirs without any limit",
	"writable layers", "container logs", "pod files (etc-hosts)",
}

func (c class) String() string { return classNames[c] }

// guarded reports whether the exporter walks such parts every cycle.
func (c class) guarded() bool { return c != classUnguarded }

// classOf is the class of a part the exporter measures.
func classOf(v part.Part) class {
	switch {
	case v.Kind == part.KindWritableLayer:
		return classLayer
	case v.Kind == part.KindContainerLogs:
		return classLogs
	case v.Kind == part.KindPodFiles:
		return classPodFiles
	case v.LimitBytes != nil:
		return classSizeLimit
	case v.BudgetBytes != nil:
		return classPodLimit
	default:
		return classUnguarded
	}
}

// tree is where the generated node lives.
type tree struct {
	kubeletRoot, podLogsDir string
	// taskDir, snapshotterRoot and mountInfo are containerd's, as exporter.LayerLocator reads them.
	taskDir, snapshotterRoot, mountInfo string
}

func newTree(dir string) tree {
	return tree{
		kubeletRoot:     filepath.Join(dir, "kubelet"),
		podLogsDir:      filepath.Join(dir, "pods-logs"),
		taskDir:         filepath.Join(dir, "containerd", "run", "io.containerd.runtime.v2.task"),
		snapshotterRoot: filepath.Join(dir, "containerd", "lib", "io.containerd.snapshotter.v1.overlayfs"),
		mountInfo:       filepath.Join(dir, "mountinfo"),
	}
}

// upperDir is the writable layer of pod p's container: its own snapshot.
func (t tree) upperDir(p podSpec) string {
	return filepath.Join(t.snapshotterRoot, "snapshots", fmt.Sprint(100+p.index), "fs")
}

// logDir is the log directory of pod p's container.
func (t tree) logDir(p podSpec) string {
	return filepath.Join(t.podLogsDir, namespace+"_"+p.name()+"_"+p.uid(), container)
}

// source is the exporter's filesystem source over the tree, at the defaults but its paths.
func (t tree) source() source.Filesystem {
	src := source.DefaultFilesystem()
	src.KubeletRootDir, src.PodLogsDir = t.kubeletRoot, t.podLogsDir
	src.Layers = &source.LayerLocator{TaskDir: t.taskDir, SnapshotterRoot: t.snapshotterRoot, MountInfo: t.mountInfo}
	return src
}

// podVolumes is the pod list the exporter's informer would give for the layout: with
// exporter.PodWatcher's ephemeral-storage parts (exporter.withStorage) for pods with a limit.
func podVolumes(layout []podSpec) []part.Pod {
	var out []part.Pod
	for _, p := range layout {
		pv := part.Pod{Namespace: namespace, Pod: p.name(), UID: p.uid()}
		var limit *int64
		if p.limit > 0 {
			l := p.limit
			limit = &l
		}
		for _, v := range p.volumes {
			vol := part.Part{Name: v.name, Medium: part.MediumDisk, BudgetBytes: limit}
			if v.limit > 0 {
				l := v.limit
				vol.LimitBytes = &l
			}
			pv.Parts = append(pv.Parts, vol)
		}
		if limit != nil {
			pv.Parts = append(pv.Parts,
				part.Part{Name: "container/" + container + "/writable-layer", Medium: part.MediumDisk, Kind: part.KindWritableLayer,
					Container: container, ContainerID: p.containerID(), BudgetBytes: limit},
				part.Part{Name: "container/" + container + "/logs", Medium: part.MediumDisk, Kind: part.KindContainerLogs,
					Container: container, BudgetBytes: limit},
				part.Part{Name: "pod/files", Medium: part.MediumDisk, Kind: part.KindPodFiles, BudgetBytes: limit})
			pv.Storage = &part.PodStorage{LimitBytes: limit,
				Containers: []part.Container{{Name: container, ID: p.containerID(), LimitBytes: limit}}}
		}
		out = append(out, pv)
	}
	return out
}

// layoutStats is what the layout holds, for the report.
type layoutStats struct {
	pods, limitedPods         int
	emptyDirFiles, layerFiles int
	logFiles                  int
	parts, files              [numClasses]int // measured parts and their files, by class
}

func statsOf(layout []podSpec) layoutStats {
	s := layoutStats{pods: len(layout)}
	for i, pv := range podVolumes(layout) {
		p := layout[i]
		s.layerFiles += p.layerFiles
		s.logFiles += len(p.logBytes)
		if p.limit > 0 {
			s.limitedPods++
		}
		files := map[string]int{}
		for _, v := range p.volumes {
			files[v.name] = v.files
			s.emptyDirFiles += v.files
		}
		for _, v := range pv.Parts {
			c := classOf(v)
			s.parts[c]++
			switch c {
			case classLayer:
				s.files[c] += p.layerFiles
			case classLogs:
				s.files[c] += len(p.logBytes)
			case classPodFiles:
				s.files[c]++
			default:
				s.files[c] += files[v.Name]
			}
		}
	}
	return s
}

// ensureTree generates the layout under dir unless a complete tree is there already, and
// writes the mount table naming its writable layers. Generating 1M files takes minutes; the
// tree is kept between runs.
func ensureTree(dir string, layout []podSpec, logf func(string, ...any)) (tree, error) {
	t := newTree(dir)
	done := filepath.Join(dir, ".complete")
	if _, err := os.Stat(done); err != nil {
		if err := os.RemoveAll(dir); err != nil {
			return t, fmt.Errorf("removing incomplete tree: %w", err)
		}
		logf("generating %d pods under %s (once; kept for later runs)", len(layout), dir)
		for _, p := range layout {
			if err := writePod(t, p); err != nil {
				return t, err
			}
		}
		if err := os.WriteFile(done, nil, 0o644); err != nil {
			return t, fmt.Errorf("marking tree complete: %w", err)
		}
	}
	// Written every run: it names absolute paths, and a run may find the tree moved; the
	// bundles are from after some trees were generated.
	if err := writeBundles(t, layout); err != nil {
		return t, err
	}
	return t, os.WriteFile(t.mountInfo, []byte(mountTable(t, layout)), 0o644)
}

// writeBundles writes each container's OCI bundle config.json in the task dir, as containerd
// does, with no image VOLUME: the exporter reads it beside the writable layer
// (source.LayerLocator.ImageVolumes).
func writeBundles(t tree, layout []podSpec) error {
	for _, p := range layout {
		_, id, _ := strings.Cut(p.containerID(), "://")
		dir := filepath.Join(t.taskDir, "k8s.io", id)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("writing bundles: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"ociVersion":"1.2.0","mounts":[]}`), 0o644); err != nil {
			return fmt.Errorf("writing bundles: %w", err)
		}
	}
	return nil
}

// writePod generates pod p's directories: its emptyDirs and etc-hosts below the kubelet root,
// its container's writable layer and its log files.
func writePod(t tree, p podSpec) error {
	for n, v := range p.volumes {
		if err := writeVolume(part.EmptyDirPath(t.kubeletRoot, p.uid(), v.name), v.files, 3*p.index+n); err != nil {
			return err
		}
	}
	hosts := fmt.Sprintf("# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n10.244.1.%d\t%s\n", p.index+2, p.name())
	if err := os.WriteFile(filepath.Join(t.kubeletRoot, "pods", p.uid(), "etc-hosts"), []byte(hosts), 0o644); err != nil {
		return fmt.Errorf("generating tree: %w", err)
	}
	upper := t.upperDir(p)
	files := p.layerFiles
	if p.bigBytes > 0 {
		if err := writeFile(filepath.Join(upper, "tmp", "download.bin"), p.bigBytes); err != nil {
			return err
		}
		files--
	}
	if err := writeVolume(filepath.Join(upper, "var", "cache", container), files, 1000+p.index); err != nil {
		return err
	}
	for n, size := range p.logBytes {
		name := []string{"0.log", "0.log.20260601-101500", "0.log.20260601-091500.gz"}[n]
		if err := writeFile(filepath.Join(t.logDir(p), name), size); err != nil {
			return err
		}
	}
	return nil
}

// mountTable is the node's mount table as the exporter reads it (mountinfo, proc(5)): the
// root filesystem, per pod its projected service account token (a tmpfs), and per container
// the overlay containerd mounts its root filesystem on, lower layers shared with the other
// containers of its image and upperdir its writable layer.
func mountTable(t tree, layout []podSpec) string {
	var b strings.Builder
	b.WriteString("22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n")
	for _, p := range layout {
		token := filepath.Join(t.kubeletRoot, "pods", p.uid(), "volumes", "kubernetes.io~projected", "kube-api-access")
		fmt.Fprintf(&b, "%d 22 0:%d / %s rw,relatime shared:%d - tmpfs tmpfs rw,size=65536k\n", 1000+2*p.index, 100+2*p.index, escapeMountinfo(token), 500+2*p.index)
		var lower []string
		for l := range 6 {
			lower = append(lower, escapeMountinfo(filepath.Join(t.snapshotterRoot, "snapshots", fmt.Sprint(10*(p.index%4)+l+1), "fs")))
		}
		_, id, _ := strings.Cut(p.containerID(), "://")
		fmt.Fprintf(&b, "%d 22 0:%d / %s rw,relatime shared:%d - overlay overlay rw,lowerdir=%s,upperdir=%s,workdir=%s\n",
			1001+2*p.index, 101+2*p.index, escapeMountinfo(filepath.Join(t.taskDir, "k8s.io", id, "rootfs")), 501+2*p.index,
			strings.Join(lower, ":"), escapeMountinfo(t.upperDir(p)), escapeMountinfo(filepath.Join(filepath.Dir(t.upperDir(p)), "work")))
	}
	return b.String()
}

// escapeMountinfo escapes a path as the kernel writes it into mountinfo: space, tab, newline
// and backslash as octal.
func escapeMountinfo(s string) string {
	return strings.NewReplacer(" ", `\040`, "\t", `\011`, "\n", `\012`, `\`, `\134`).Replace(s)
}

// writeVolume fills dir with files small files, filesPerDir per directory two levels deep, of
// sizes from 0 to 16 KiB (most below a block), as caches and scratch space hold.
func writeVolume(dir string, files, seed int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("generating tree: %w", err)
	}
	buf := make([]byte, 16<<10)
	for f := 0; f < files; f++ {
		sub := filepath.Join(dir, fmt.Sprintf("d%02d", f/(filesPerDir*filesPerDir)), fmt.Sprintf("d%02d", f/filesPerDir%filesPerDir))
		if f%filesPerDir == 0 {
			if err := os.MkdirAll(sub, 0o755); err != nil {
				return fmt.Errorf("generating tree: %w", err)
			}
		}
		size := (f*7919 + seed*104729) % (16 << 10)
		if f%4 != 0 {
			size %= 2048
		}
		if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%05d", f)), buf[:size], 0o644); err != nil {
			return fmt.Errorf("generating tree: %w", err)
		}
	}
	return nil
}

// writeFile writes a file of size bytes, neither sparse nor all zeros, with its directory.
func writeFile(path string, size int64) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("generating tree: %w", err)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("generating tree: %w", err)
	}
	chunk := make([]byte, 1<<20)
	for i := range chunk {
		chunk[i] = byte(i)
	}
	for size > 0 {
		n := min(size, int64(len(chunk)))
		if _, err := f.Write(chunk[:n]); err != nil {
			f.Close()
			return fmt.Errorf("generating tree: %w", err)
		}
		size -= n
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("generating tree: %w", err)
	}
	return nil
}
