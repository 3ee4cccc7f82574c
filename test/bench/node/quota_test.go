package node

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/emptydir-guard/emptydir-guard/exporter/part"
	"github.com/emptydir-guard/emptydir-guard/internal/docsection"
	"github.com/emptydir-guard/emptydir-guard/internal/fswalk"
	"github.com/emptydir-guard/emptydir-guard/internal/fswalk/fswalktest"
)

const (
	// inLaneEnv is set inside the kernel lane, to the prjquota mount of the node's image.
	inLaneEnv = "EMPTYDIR_GUARD_BENCH_IN_LANE"
	// laneResult prefixes the one line the lane's run prints its figures on.
	laneResult = "NODE-QUOTA-RESULT "
	// quotaImageSize holds the node's 1M files (about 6 GiB in 4 KiB blocks) with room; sparse.
	quotaImageSize = 16 << 30
	quotaRounds    = 3
)

// cycleCost is one collection cycle that measures every part of the node (as the exporter's
// first cycle does, and each cycle would if the budget covered every part).
type cycleCost struct {
	CPU, WalkCPU, Wall float64 // seconds: the process's CPU, the walks' threads' (what the budget charges)
}

// laneFigures is what the run inside the kernel lane measures and reports to the host.
type laneFigures struct {
	Walk, Quota cycleCost // medians of quotaRounds warm cycles
	// QuotaVolumes is the emptyDirs published from their quota with the walk's bytes and inodes.
	QuotaVolumes int
}

// BenchmarkNodeQuota answers, for a node whose emptyDirs are under the kubelet's project
// quotas (pods with hostUsers: false and the LocalStorageCapacityIsolationFSQuotaMonitoring
// gate, on XFS mounted with prjquota), what a collection cycle costs against the same node
// walked. The node is BenchmarkNode's (layout.go: 110 pods, 1M files), generated once into an
// XFS image with a project ID on every emptyDir as the kubelet assigns them. On this host it
// measures full cycles that walk every emptyDir natively; then it boots the kernel lane
// (docs/kernel-lane.md) with the image as a disk, where the same benchmark measures full
// cycles reading the quotas against full cycles walking, and checks that every emptyDir is
// published from its quota with the walk's bytes and inodes. Emulated times mean nothing; the
// ratio does, and it applied to the native cycle estimates a quota node's cost. Writes
// docs/performance.md, section node-quota (make bench-node-quota). Needs root.
func BenchmarkNodeQuota(b *testing.B) {
	layout := nodeLayout(1)
	if mnt := os.Getenv(inLaneEnv); mnt != "" {
		for b.Loop() {
			figures, err := measureInLane(b, mnt, layout)
			if err != nil {
				b.Fatal(err)
			}
			line, err := json.Marshal(figures)
			if err != nil {
				b.Fatal(err)
			}
			fmt.Println(laneResult + string(line))
		}
		return
	}
	if os.Geteuid() != 0 {
		b.Fatal("BenchmarkNodeQuota needs root: loop devices and mounts (and the kernel lane's)")
	}
	dir := os.Getenv(dirEnv)
	if dir == "" {
		dir = "/var/tmp/emptydir-guard-bench"
	}
	img := filepath.Join(dir, layoutVersion+"-quota.img")
	for b.Loop() {
		if err := ensureQuotaImage(b, img, layout); err != nil {
			b.Fatal(err)
		}
		native, err := measureNative(b, img, layout)
		if err != nil {
			b.Fatal(err)
		}
		lane, err := runLane(b, img)
		if err != nil {
			b.Fatal(err)
		}
		ratio := lane.Quota.CPU / lane.Walk.CPU
		b.ReportMetric(ratio, "quota/walk-cpu")
		b.ReportMetric(100*ratio*native.CPU/defaultCycle.Seconds(), "quota-node-%core-est")
		body := quotaReport(statsOf(layout), native, lane)
		b.Log("\n" + body)
		if err := docsection.Replace(filepath.Join("..", "..", "..", "docs", "performance.md"), "node-quota", "make bench-node-quota", body); err != nil {
			b.Error(err)
		}
	}
}

// ensureQuotaImage generates the node into an XFS image unless one is complete already: the
// tree of layout.go, then a project ID on every emptyDir and everything in it, as the kubelet's
// xfs_quota project -s sets them. The host's kernel needs no quota support for this: XFS keeps
// project IDs without accounting, and the lane's prjquota mount counts them (quotacheck).
func ensureQuotaImage(b *testing.B, img string, layout []podSpec) error {
	done := img + ".complete"
	if _, err := os.Stat(done); err == nil {
		return nil
	}
	b.Logf("generating the quota node into %s (once; kept for later runs)", img)
	if err := os.MkdirAll(filepath.Dir(img), 0o755); err != nil {
		return err
	}
	f, err := os.Create(img)
	if err == nil {
		err = errors.Join(f.Truncate(quotaImageSize), f.Close())
	}
	if err != nil {
		return fmt.Errorf("quota image: %w", err)
	}
	if out, err := exec.Command("mkfs.xfs", "-q", "-f", img).CombinedOutput(); err != nil {
		return fmt.Errorf("mkfs.xfs %s (make deps installs it): %w: %s", img, err, out)
	}
	mnt, unmount, err := mountImage(img)
	if err != nil {
		return err
	}
	t, err := ensureTree(filepath.Join(mnt, layoutVersion), layout, b.Logf)
	if err == nil {
		err = assignProjects(t, layout)
	}
	if err = errors.Join(err, unmount()); err != nil {
		return err
	}
	return os.WriteFile(done, nil, 0o644)
}

// assignProjects gives every emptyDir of the layout a project ID of its own, the kubelet's
// first IDs in order, set on the directory (with the inherit flag) and on all it holds.
func assignProjects(t tree, layout []podSpec) error {
	id := uint32(fswalktest.KubeletFirstProjectID)
	for _, p := range layout {
		for _, v := range p.volumes {
			err := filepath.WalkDir(part.EmptyDirPath(t.kubeletRoot, p.uid(), v.name), func(path string, d fs.DirEntry, err error) error {
				if err != nil {
					return err
				}
				return fswalktest.SetProject(path, id, d.IsDir())
			})
			if err != nil {
				return fmt.Errorf("project of %s/%s: %w", p.name(), v.name, err)
			}
			id++
		}
	}
	return nil
}

// mountImage mounts img on a loop device in a temporary directory; unmount undoes both.
func mountImage(img string) (mnt string, unmount func() error, err error) {
	out, err := exec.Command("losetup", "--find", "--show", img).CombinedOutput()
	if err != nil {
		return "", nil, fmt.Errorf("losetup %s: %w: %s", img, err, out)
	}
	dev := strings.TrimSpace(string(out))
	detach := func() error {
		if out, err := exec.Command("losetup", "--detach", dev).CombinedOutput(); err != nil {
			return fmt.Errorf("losetup --detach %s: %w: %s", dev, err, out)
		}
		return nil
	}
	if mnt, err = os.MkdirTemp("", "node-quota-"); err != nil {
		return "", nil, errors.Join(err, detach())
	}
	if err := unix.Mount(dev, mnt, "xfs", 0, ""); err != nil {
		return "", nil, errors.Join(fmt.Errorf("mount %s: %w", dev, err), detach(), os.Remove(mnt))
	}
	return mnt, func() error {
		return errors.Join(unix.Unmount(mnt, 0), detach(), os.Remove(mnt))
	}, nil
}

// measureNative is the median full cycle on this host, walking every emptyDir of the image.
func measureNative(b *testing.B, img string, layout []podSpec) (cost cycleCost, err error) {
	mnt, unmount, err := mountImage(img)
	if err != nil {
		return cost, err
	}
	defer func() { err = errors.Join(err, unmount()) }()
	t, err := ensureTree(filepath.Join(mnt, layoutVersion), layout, b.Logf)
	if err != nil {
		return cost, err
	}
	var cycles []cycleCost
	for round := range quotaRounds + 1 {
		c, _, err := fullCycle(t, podVolumes(layout))
		if err != nil {
			return cost, err
		}
		if round > 0 { // the first warms the caches
			cycles = append(cycles, c)
		}
	}
	return medianCycle(cycles), nil
}

// measureInLane runs, inside the kernel lane, full cycles walking every emptyDir and full
// cycles reading their quotas (the pods in user namespaces), alternating, and checks each
// quota cycle against the walk before it.
func measureInLane(b *testing.B, mnt string, layout []podSpec) (laneFigures, error) {
	var out laneFigures
	t, err := ensureTree(filepath.Join(mnt, layoutVersion), layout, b.Logf)
	if err != nil {
		return out, err
	}
	probe := part.EmptyDirPath(t.kubeletRoot, layout[0].uid(), layout[0].volumes[0].name)
	if _, err := fswalk.ReadProjectQuota(probe); err != nil {
		return out, fmt.Errorf("the image's volumes are not under project quotas here (mount with prjquota): %w", err)
	}
	walkPods := podVolumes(layout)
	quotaPods := podVolumes(layout)
	for i := range quotaPods {
		quotaPods[i].UserNamespace = true
	}
	var walks, quotas []cycleCost
	for round := range quotaRounds + 1 {
		w, wn, err := fullCycle(t, walkPods)
		if err != nil {
			return out, err
		}
		q, qn, err := fullCycle(t, quotaPods)
		if err != nil {
			return out, err
		}
		if out.QuotaVolumes, err = sameAsWalk(walkPods, wn, qn); err != nil {
			return out, err
		}
		b.Logf("round %d: walk %.2fs CPU, quota %.2fs CPU", round, w.CPU, q.CPU)
		if round > 0 {
			walks, quotas = append(walks, w), append(quotas, q)
		}
	}
	out.Walk, out.Quota = medianCycle(walks), medianCycle(quotas)
	return out, nil
}

// fullCycle runs one collection cycle of a new exporter at the defaults that measures every part.
func fullCycle(t tree, pods []part.Pod) (cycleCost, *node, error) {
	n, err := newNode(t, pods, everyInterval, false)
	if err != nil {
		return cycleCost{}, nil, err
	}
	p := startProbe()
	n.exp.Refresh(context.Background())
	u := p.stop()
	walkCPU, err := n.counter("emptydir_exporter_walk_cpu_seconds_total", "", "")
	if err != nil {
		return cycleCost{}, nil, err
	}
	return cycleCost{CPU: u.cpu.Seconds(), WalkCPU: walkCPU, Wall: u.wall.Seconds()}, n, nil
}

// sameAsWalk checks that the quota node published every emptyDir from its quota, the walking
// node by walking it, both with the same bytes and inodes; it returns how many emptyDirs.
func sameAsWalk(pods []part.Pod, walk, quota *node) (int, error) {
	methods := func(n *node) (map[string]string, error) {
		info, err := n.values("emptydir_measurement_info", "pod", "volume", "method")
		out := map[string]string{}
		for k := range info {
			i := strings.LastIndex(k, "/")
			out[k[:i]] = k[i+1:]
		}
		return out, err
	}
	var errs []error
	wm, err := methods(walk)
	errs = append(errs, err)
	qm, err := methods(quota)
	errs = append(errs, err)
	wu, err := walk.volumeValues("emptydir_used_bytes")
	errs = append(errs, err)
	qu, err := quota.volumeValues("emptydir_used_bytes")
	errs = append(errs, err)
	wi, err := walk.volumeValues("emptydir_inodes_used")
	errs = append(errs, err)
	qi, err := quota.volumeValues("emptydir_inodes_used")
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	n := 0
	for _, p := range pods {
		for _, v := range p.Parts {
			if v.Kind != part.KindEmptyDir {
				continue
			}
			k := p.Pod + "/" + v.Name
			if wm[k] != part.MethodWalk || qm[k] != part.MethodProjectQuota || wu[k] != qu[k] || wi[k] != qi[k] {
				errs = append(errs, fmt.Errorf("%s: walked by %q: %.0f bytes, %.0f inodes; with quotas by %q: %.0f bytes, %.0f inodes",
					k, wm[k], wu[k], wi[k], qm[k], qu[k], qi[k]))
				continue
			}
			n++
		}
	}
	return n, errors.Join(errs...)
}

// runLane boots the kernel lane with img as its disk, mounted with prjquota, runs this
// benchmark there and returns its figures.
func runLane(b *testing.B, img string) (laneFigures, error) {
	var out laneFigures
	cmd := exec.Command(filepath.Join("..", "..", "kernellane", "lane.sh"), "./node",
		"-test.run", "^$", "-test.bench", "^BenchmarkNodeQuota$", "-test.benchtime", "1x", "-test.timeout", "2h")
	cmd.Env = append(os.Environ(), "KERNEL_LANE_MODULE=..", "KERNEL_LANE_DISK="+img,
		"KERNEL_LANE_ENV="+inLaneEnv+"=/disk", "KERNEL_LANE_MEMORY=8G", "KERNEL_LANE_TIMEOUT=7200")
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return out, err
	}
	b.Log("booting the kernel lane with the quota node's image (quotacheck, then the cycles: about 20 minutes)")
	if err := cmd.Start(); err != nil {
		return out, fmt.Errorf("kernel lane: %w", err)
	}
	found := false
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		fmt.Fprintln(os.Stderr, line)
		if i := strings.Index(line, laneResult); i >= 0 {
			if err := json.Unmarshal([]byte(line[i+len(laneResult):]), &out); err != nil {
				return out, fmt.Errorf("kernel lane result %q: %w", line, err)
			}
			found = true
		}
	}
	_, _ = io.Copy(io.Discard, stdout)
	if err := cmd.Wait(); err != nil {
		return out, fmt.Errorf("kernel lane: %w", err)
	}
	if !found {
		return out, errors.New("the kernel lane printed no " + strings.TrimSpace(laneResult))
	}
	return out, nil
}

func medianCycle(cs []cycleCost) cycleCost {
	return medianBy(cs, func(c cycleCost) time.Duration { return time.Duration(c.CPU * float64(time.Second)) })
}

// quotaReport is the section node-quota of docs/performance.md.
func quotaReport(st layoutStats, native cycleCost, lane laneFigures) string {
	var w strings.Builder
	ratio := lane.Quota.CPU / lane.Walk.CPU
	walked := st.files[classLayer] + st.files[classLogs] + st.files[classPodFiles]
	fmt.Fprintf(&w, "BenchmarkNode's node (%d pods, %s files in %d emptyDirs, %s in writable layers) on XFS, every emptyDir under a project quota of its own as the kubelet assigns them; the pods run with `hostUsers: false`. One collection cycle that measures every part (the exporter's first cycle; at the defaults, what each cycle does when the budget covers every guarded part), median of %d on a warm cache. With quotas, the exporter still walks the writable layers, logs and pod files of the %d pods with a limit (%s files), which no quota covers.\n\n",
		st.pods, thousands(st.emptyDirFiles), st.parts[classSizeLimit]+st.parts[classPodLimit]+st.parts[classUnguarded],
		thousands(st.layerFiles), quotaRounds, st.limitedPods, thousands(walked))
	fmt.Fprintf(&w, "| per full cycle | emptyDirs walked | emptyDirs read from their quotas | quota/walk |\n| --- | --- | --- | --- |\n")
	fmt.Fprintf(&w, "| CPU of the process, kernel lane (emulated) | %s | %s | **%.3f** |\n", seconds(lane.Walk.CPU), seconds(lane.Quota.CPU), ratio)
	fmt.Fprintf(&w, "| of which the walks' threads (what the budget charges), kernel lane | %s | %s | %.3f |\n", seconds(lane.Walk.WalkCPU), seconds(lane.Quota.WalkCPU), lane.Quota.WalkCPU/lane.Walk.WalkCPU)
	fmt.Fprintf(&w, "| wall, kernel lane (emulated) | %s | %s | %.3f |\n", seconds(lane.Walk.Wall), seconds(lane.Quota.Wall), lane.Quota.Wall/lane.Walk.Wall)
	walkRatio := lane.Quota.WalkCPU / lane.Walk.WalkCPU
	fmt.Fprintf(&w, "| CPU of the process, this host (native) | %s | ≈ %s (the ratio applied) | |\n", seconds(native.CPU), seconds(ratio*native.CPU))
	fmt.Fprintf(&w, "| of which the walks' threads, this host (native) | %s | ≈ %s (the ratio applied) | |\n", seconds(native.WalkCPU), seconds(walkRatio*native.WalkCPU))
	cycle := defaultCycle.Seconds()
	fmt.Fprintf(&w, "| share of a core, a full cycle every %s: the process | %.1f %% | **≈ %.1f %%** | |\n", dur(defaultCycle), 100*native.CPU/cycle, 100*ratio*native.CPU/cycle)
	budgetShare := walkRatio * native.WalkCPU / cycle
	fmt.Fprintf(&w, "| the same, what the %.0f %% CPU budget charges | %.1f %% | **≈ %.1f %%** | |\n\n", 100*defaults.cpuBudget, 100*native.WalkCPU/cycle, 100*budgetShare)
	verdict := "within the budget: at the defaults the exporter measures every guarded part every cycle, where the walking node defers most of them"
	if budgetShare > defaults.cpuBudget {
		verdict = "still above the budget: at the defaults some guarded parts (the writable layers of pods far from their limits) are deferred, though far fewer than on the walking node"
	}
	fmt.Fprintf(&w, "With quotas, measuring every part every cycle is %s. In the lane, all %d emptyDirs were published from their quotas (`method=\"project_quota\"`) with the walk's bytes and inodes, in every round. The native column walks the same image on this host's kernel (%d cores, Go %s; the lane's walk took %.1f× its CPU); the quota column's native figures are estimates, the lane's ratios applied to them, assuming emulation slows both cycles alike.\n",
		verdict, lane.QuotaVolumes, numCPU(), goVersion(), lane.Walk.CPU/native.CPU)
	return w.String()
}
