package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/emptydir-guard/emptydir-guard/exporter/part"
	"github.com/emptydir-guard/emptydir-guard/test/bench/peers"
)

// The benchmark's node is what its report says: 1M files across emptyDirs and writable
// layers, half the pods with a limit.
func TestLayoutCounts(t *testing.T) {
	s := statsOf(nodeLayout(1))
	if s.pods != 110 || s.limitedPods != 55 {
		t.Errorf("%d pods, %d with a limit; want 110, 55", s.pods, s.limitedPods)
	}
	if s.emptyDirFiles != 820_000 || s.layerFiles != 180_000 {
		t.Errorf("%d files in emptyDirs, %d in writable layers; want 820,000 and 180,000", s.emptyDirFiles, s.layerFiles)
	}
	want := [numClasses]int{classSizeLimit: 121, classPodLimit: 99, classUnguarded: 110, classLayer: 55, classLogs: 55, classPodFiles: 55}
	if s.parts != want {
		t.Errorf("parts by class %v, want %v", s.parts, want)
	}
}

// A few pods of the layout, generated small (below a directory with a space, which the mount
// table escapes), through one collection cycle: every part is measured, every writable
// layer located, and ours agrees with the peers, as onePass checks on the whole node.
func TestLayout(t *testing.T) {
	layout := nodeLayout(1000)[:12]
	tr, err := ensureTree(filepath.Join(t.TempDir(), "a node"), layout, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	pods := fixedPods(podVolumes(layout))
	n, err := newNode(tr, pods, everyInterval, false)
	if err != nil {
		t.Fatal(err)
	}
	n.exp.Refresh(context.Background())
	var want peerTotals
	if want.emptyDirBytes, want.emptyDirInodes, err = kubeletEmptyDirs(tr, pods); err != nil {
		t.Fatal(err)
	}
	if want.layerBytes, err = peerLayers(tr, layout, true); err != nil {
		t.Fatal(err)
	}
	if want.logBytes, want.podFileBytes, err = fileTotals(tr, layout); err != nil {
		t.Fatal(err)
	}
	if err := verifyPass(n, layout, want); err != nil {
		t.Fatal(err)
	}
	walks, _ := n.source.counts()
	var ages [numClasses][]float64
	n.source.ages(pods, n.started, n.started, &ages)
	for c := range numClasses {
		if int(walks[c]) != len(ages[c]) || walks[c] == 0 {
			t.Errorf("%s: %d walks, %d parts", c, walks[c], len(ages[c]))
		}
	}
}

// peerTotals is what the peers (and the benchmark's own stat of the log files) found.
type peerTotals struct {
	emptyDirBytes, emptyDirInodes int64
	layerBytes                    int64
	logBytes, podFileBytes        int64
}

// kubeletEmptyDirs walks every emptyDir of pods with the kubelet's fs.DiskUsage.
func kubeletEmptyDirs(t tree, pods fixedPods) (bytes, inodes int64, err error) {
	for _, pv := range pods {
		for _, v := range pv.Parts {
			if v.Kind != part.KindEmptyDir {
				continue
			}
			u, err := peers.Kubelet(part.EmptyDirPath(t.kubeletRoot, pv.UID, v.Name))
			if err != nil {
				return 0, 0, err
			}
			bytes, inodes = bytes+u.Bytes, inodes+u.Inodes
		}
	}
	return bytes, inodes, nil
}

// peerLayers walks, with the kubelet's fs.DiskUsage, the writable layers of the pods with an
// ephemeral-storage limit (limited), which ours measures, or of the others.
func peerLayers(t tree, layout []podSpec, limited bool) (int64, error) {
	var bytes int64
	for _, p := range layout {
		if (p.limit > 0) != limited {
			continue
		}
		u, err := peers.Kubelet(t.upperDir(p))
		if err != nil {
			return 0, err
		}
		bytes += u.Bytes
	}
	return bytes, nil
}

// fileTotals adds up the allocated bytes of the log files of the pods with a limit, and of
// their etc-hosts files and the files directly in their log directories.
func fileTotals(t tree, layout []podSpec) (logs, podFiles int64, err error) {
	blocks := func(dir string) (int64, error) {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return 0, fmt.Errorf("reading %s: %w", dir, err)
		}
		var sum int64
		for _, e := range entries {
			if !e.Type().IsRegular() {
				continue
			}
			b, err := fileBlocks(filepath.Join(dir, e.Name()))
			if err != nil {
				return 0, err
			}
			sum += b
		}
		return sum, nil
	}
	for _, p := range layout {
		if p.limit == 0 {
			continue
		}
		l, err := blocks(t.logDir(p))
		if err != nil {
			return 0, 0, err
		}
		own, err := blocks(filepath.Dir(t.logDir(p)))
		if err != nil {
			return 0, 0, err
		}
		hosts, err := fileBlocks(filepath.Join(t.kubeletRoot, "pods", p.uid(), "etc-hosts"))
		if err != nil {
			return 0, 0, err
		}
		logs, podFiles = logs+l, podFiles+own+hosts
	}
	return logs, podFiles, nil
}

// fileBlocks is the bytes of the blocks allocated to the file at path.
func fileBlocks(path string) (int64, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return 0, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, fmt.Errorf("%s: no stat_t", path)
	}
	return st.Blocks * 512, nil
}

// verifyPass checks what the exporter n published after measuring every part of layout once
// against what the peers found: the emptyDirs (emptydir_used_bytes, emptydir_inodes_used),
// and the parts of the pods with a limit (emptydir_pod_ephemeral_storage_part_bytes), each
// pod's total complete, every writable layer located.
func verifyPass(n *node, layout []podSpec, want peerTotals) error {
	used, err := n.volumeValues("emptydir_used_bytes")
	if err != nil {
		return err
	}
	inodes, err := n.volumeValues("emptydir_inodes_used")
	if err != nil {
		return err
	}
	emptyDirs, limited := 0, map[string]bool{}
	var limitedEmptyDirs float64
	for _, p := range layout {
		emptyDirs += len(p.volumes)
		if p.limit > 0 {
			limited[p.name()] = true
			for _, v := range p.volumes {
				limitedEmptyDirs += used[p.name()+"/"+v.name]
			}
		}
	}
	var errs []error
	if ob, oi := sum(used), sum(inodes); int64(ob) != want.emptyDirBytes || int64(oi) != want.emptyDirInodes || len(used) != emptyDirs {
		errs = append(errs, fmt.Errorf("emptyDirs: ours %d volumes, %.0f bytes, %.0f inodes; kubelet %d volumes, %d bytes, %d inodes",
			len(used), ob, oi, emptyDirs, want.emptyDirBytes, want.emptyDirInodes))
	}
	parts, err := n.values("emptydir_pod_ephemeral_storage_part_bytes", "pod", "part")
	if err != nil {
		return err
	}
	byPart := map[string]float64{}
	for k, v := range parts {
		pod, partName := filepath.Split(k)
		if !limited[filepath.Clean(pod)] {
			errs = append(errs, fmt.Errorf("pod %s has no ephemeral-storage limit but a part %s", pod, partName))
		}
		byPart[partName] += v
	}
	for _, c := range []struct {
		part string
		want float64
	}{
		{part.LabelEmptyDir, limitedEmptyDirs}, {part.LabelWritableLayer, float64(want.layerBytes)},
		{part.LabelLogs, float64(want.logBytes)}, {part.LabelOther, float64(want.podFileBytes)},
	} {
		if byPart[c.part] != c.want {
			errs = append(errs, fmt.Errorf("part %s: ours %.0f bytes, peers %.0f", c.part, byPart[c.part], c.want))
		}
	}
	// A series only while a pod's usage is a lower bound: none here.
	incomplete, err := n.values("emptydir_pod_ephemeral_storage_measurement_incomplete", "pod", "reason")
	if err != nil {
		return err
	}
	for k := range incomplete {
		errs = append(errs, fmt.Errorf("pod usage a lower bound: %s", k))
	}
	unlocated, err := n.values("emptydir_container_writable_layer_unlocated", "pod", "reason")
	if err != nil {
		return err
	}
	for k := range unlocated {
		errs = append(errs, fmt.Errorf("writable layer not located: %s", k))
	}
	return errors.Join(errs...)
}

func sum(m map[string]float64) float64 {
	var s float64
	for _, v := range m {
		s += v
	}
	return s
}
