// Package node benchmarks the exporter on one busy node: 110 pods with 3 emptyDirs each,
// 1M files in all, only some volumes with a sizeLimit, under a fake kubelet root dir.
package node

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/emptydir-guard/emptydir-guard/exporter"
)

// layoutVersion names the generated tree; change it when the layout changes, so that a tree
// cached on disk by an earlier run is generated again.
const layoutVersion = "node-v1"

const (
	pods          = 110
	filesPerDir   = 100
	uidPrefix     = "0b5e4c1d-0000-4000-8000-"
	limitedVolume = "scratch"
)

// volumeSpec is one emptyDir of the node: how many files it holds and its sizeLimit (0: none).
type volumeSpec struct {
	pod, name string
	files     int
	limit     int64
}

// nodeLayout is the node: per pod a "scratch" volume with a sizeLimit (small, as scratch space
// is), a "cache" and a "data" volume without one, where the bulk of the files sit; every tenth
// pod's cache has a sizeLimit too. A few volumes are big (50k files), most are small, as on a
// real node. 1,000,100 files in all, 149,600 of them in the 121 volumes with a sizeLimit.
func nodeLayout() []volumeSpec {
	var out []volumeSpec
	for i := range pods {
		pod := fmt.Sprintf("app-%03d", i)
		scratch := volumeSpec{pod: pod, name: limitedVolume, files: 610, limit: 64 << 20}
		cache := volumeSpec{pod: pod, name: "cache", files: 1500}
		data := volumeSpec{pod: pod, name: "data", files: 1700}
		switch {
		case i < 10: // the big ones
			data.files = 40000
		case i < 50:
			data.files = 5000
		}
		if i%10 == 0 {
			cache.limit, cache.files = 256<<20, 7500
		}
		out = append(out, scratch, cache, data)
	}
	return out
}

// uid is the pod UID of pod index i.
func uid(i int) string { return fmt.Sprintf("%s%012d", uidPrefix, i) }

// podVolumes is the pod list the exporter's informer would give for the layout.
func podVolumes(layout []volumeSpec) []exporter.PodVolumes {
	var out []exporter.PodVolumes
	byPod := map[string]int{}
	for _, v := range layout {
		i, ok := byPod[v.pod]
		if !ok {
			n, _ := strconv.Atoi(v.pod[len("app-"):])
			out = append(out, exporter.PodVolumes{Namespace: "bench", Pod: v.pod, UID: uid(n)})
			i = len(out) - 1
			byPod[v.pod] = i
		}
		vol := exporter.Volume{Name: v.name, Medium: exporter.MediumDisk}
		if v.limit > 0 {
			l := v.limit
			vol.LimitBytes = &l
		}
		out[i].Volumes = append(out[i].Volumes, vol)
	}
	return out
}

// ensureTree generates the layout's volume folders under root/<layoutVersion> unless a
// complete tree is there already, and returns the kubelet root dir. Generating 1M files takes
// minutes; the tree is kept between runs.
func ensureTree(root string, layout []volumeSpec, logf func(string, ...any)) (string, error) {
	kubeletRoot := filepath.Join(root, layoutVersion)
	done := filepath.Join(kubeletRoot, ".complete")
	if _, err := os.Stat(done); err == nil {
		return kubeletRoot, nil
	}
	if err := os.RemoveAll(kubeletRoot); err != nil {
		return "", fmt.Errorf("removing incomplete tree: %w", err)
	}
	logf("generating %d volumes under %s (once; kept for later runs)", len(layout), kubeletRoot)
	pv := podVolumes(layout)
	uidOf := map[string]string{}
	for _, p := range pv {
		uidOf[p.Pod] = p.UID
	}
	for n, v := range layout {
		dir := exporter.Dir(kubeletRoot, uidOf[v.pod], v.name)
		if err := writeVolume(dir, v.files, n); err != nil {
			return "", err
		}
	}
	if err := os.WriteFile(done, nil, 0o644); err != nil {
		return "", fmt.Errorf("marking tree complete: %w", err)
	}
	return kubeletRoot, nil
}

// writeVolume fills dir with files small files, filesPerDir per folder two levels deep, of
// sizes from 0 to 16 KiB (most below a block), as caches and scratch space hold.
func writeVolume(dir string, files, seed int) error {
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
