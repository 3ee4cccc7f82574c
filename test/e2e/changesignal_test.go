package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/emptydir-guard/emptydir-guard/exporter/part"
	"github.com/emptydir-guard/emptydir-guard/test/cluster"
	"github.com/emptydir-guard/emptydir-guard/test/framework"
)

// The schedule of TestChangeSignalOnRealCgroups: cycles every signalInterval, every part
// walked at least every signalSweep whatever its pod's cgroup says.
const (
	signalInterval = 2 * time.Second
	signalSweep    = 12 * time.Second
)

// TestChangeSignalOnRealCgroups runs the chart's exporter with exporter.changeSignal skipping
// unchanged parts (skipUnchanged; at the default they are walked last, which on a node this quiet
// walks them every cycle, as in every other real-cluster test) against the real kubelet's pod
// cgroups (cgroupfs driver, a cgroup root of the cluster's own, this host's cgroup version) and
// proves the schedule the issue asks for: a pod whose containers
// write is walked every cycle; a pod that writes nothing is not, its figures vouched unchanged
// at every cycle instead (emptydir_measurement_unchanged_timestamp_seconds); and what its cgroup
// cannot see — space allocated with fallocate, and files written by a process outside the pod's
// cgroup (here: this test, on the node) — is published no later than the sweep bound after it
// happened, although the cycles in between vouch the pod unchanged.
func TestChangeSignalOnRealCgroups(t *testing.T) {
	c := sharedCluster(t)
	ctx, cancel := context.WithTimeout(rootCtx, 6*time.Minute)
	defer cancel()

	in, objs := chartInstall(t, c, "signal", "signal-guard", fmt.Sprintf(`
  changeSignal: {enabled: true, skipUnchanged: true, cgroupRoot: %s, cgroupDriver: cgroupfs}
  collectionInterval: %s
  metricOptInList: [emptydir_measurement_age_seconds, emptydir_measurement_unchanged_timestamp_seconds]
  flags:
    collection.unlimited-interval: %s`, c.CgroupRoot(), signalInterval, signalSweep), "")
	installed := installObjects(ctx, t, c, in, objs, deployAPIEnv(t, c))
	exp, _ := installed.createPods(ctx, t)
	exp = deployWaitReady(ctx, t, c, exp)
	metricsURL := deployExporterURL(exp) + "/metrics"

	ns := framework.Namespace(ctx, t, c, "signal")
	// The writer appends 64 KiB every second; the idle pods run a shell blocked on a read.
	writer := framework.RunPod(ctx, t, c, signalPod(c, ns, "writer",
		`while true; do dd if=/dev/zero bs=64k count=1 >>/test/log 2>/dev/null; sleep 1; done`))
	idle := framework.RunPod(ctx, t, c, signalPod(c, ns, "idle", `exec sleep 2147483647`))
	// Two more pods, idle until the test opens a FIFO in their emptyDir (a blocked read
	// charges nothing): one then writes 2 MiB and exits, to be restarted (its container's
	// cgroup removed), the other creates 3000 empty files (metadata only).
	restarter := signalPod(c, ns, "restarter", `if [ -e /test/big ]; then exec sleep 2147483647; fi
mkfifo /test/go && read x < /test/go && dd if=/dev/zero of=/test/big bs=1M count=2 2>/dev/null; exit 1`)
	restarter.Spec.RestartPolicy = corev1.RestartPolicyAlways
	restarter = framework.RunPod(ctx, t, c, restarter)
	meta := framework.RunPod(ctx, t, c, signalPod(c, ns, "meta", `mkfifo /test/go /test/hold && read x < /test/go && mkdir /test/m && cd /test/m &&
i=0; while [ $i -lt 3000 ]; do : > f$i; i=$((i+1)); done; read x < /test/hold`))
	labels := func(p *corev1.Pod) map[string]string {
		return map[string]string{"namespace": ns, "pod": p.Name, "volume": "data"}
	}
	scrape := func() map[string]*dto.MetricFamily {
		t.Helper()
		fams, err := framework.Scrape(ctx, c, metricsURL)
		if err != nil {
			t.Fatal(err)
		}
		return fams
	}
	sample := func(fams map[string]*dto.MetricFamily, name string, p *corev1.Pod) (float64, bool) {
		return framework.Sample(fams, name, labels(p))
	}
	framework.Eventually(t, 90*time.Second, time.Second, "the pods measured and the idle ones vouched unchanged", func() (bool, string) {
		fams := scrape()
		_, w := sample(fams, "emptydir_used_bytes", writer)
		vouched := map[string]bool{}
		for _, p := range []*corev1.Pod{idle, restarter, meta} {
			_, vouched[p.Name] = sample(fams, "emptydir_measurement_unchanged_timestamp_seconds", p)
		}
		return w && vouched[idle.Name] && vouched[restarter.Name] && vouched[meta.Name],
			fmt.Sprintf("writer measured %v, vouched unchanged %v; marks %v", w, vouched, marksByOutcome(fams))
	})

	// Over two sweeps: the writer's age stays within a cycle or two, the idle pod's grows past
	// several cycles while its unchanged mark stays fresh.
	var writerAgeMax, idleAgeMax, idleUnchangedLagMax float64
	before := scrape()
	unchangedBefore, _ := framework.Sample(before, "emptydir_exporter_walks_unchanged_total", nil)
	for end := time.Now().Add(2 * signalSweep); time.Now().Before(end); time.Sleep(signalInterval / 2) {
		fams := scrape()
		now := float64(time.Now().UnixNano()) / 1e9
		if age, ok := sample(fams, "emptydir_measurement_age_seconds", writer); ok {
			writerAgeMax = max(writerAgeMax, age)
		}
		if age, ok := sample(fams, "emptydir_measurement_age_seconds", idle); ok {
			idleAgeMax = max(idleAgeMax, age)
		}
		if ts, ok := sample(fams, "emptydir_measurement_unchanged_timestamp_seconds", idle); ok {
			idleUnchangedLagMax = max(idleUnchangedLagMax, now-ts)
		}
		if _, ok := sample(fams, "emptydir_measurement_unchanged_timestamp_seconds", writer); ok {
			t.Errorf("the writer's figures are vouched unchanged while it writes every second")
			break
		}
	}
	after := scrape()
	unchangedAfter, _ := framework.Sample(after, "emptydir_exporter_walks_unchanged_total", nil)
	t.Logf("over %s: writer age ≤ %.1f s, idle age ≤ %.1f s, idle unchanged mark ≤ %.1f s old, %v walks spared; marks %v",
		2*signalSweep, writerAgeMax, idleAgeMax, idleUnchangedLagMax, unchangedAfter-unchangedBefore, marksByOutcome(after))
	if limit := (2*signalInterval + time.Second).Seconds(); writerAgeMax > limit {
		t.Errorf("the writer's measurement was up to %.1f s old, want at most %.0f s: a pod that writes is walked every cycle", writerAgeMax, limit)
	}
	if floor := (3 * signalInterval).Seconds(); idleAgeMax < floor {
		t.Errorf("the idle pod's measurement was at most %.1f s old, want above %.0f s: a pod that writes nothing is not walked every cycle", idleAgeMax, floor)
	}
	if bound := (signalSweep + 2*signalInterval + 2*time.Second).Seconds(); idleAgeMax > bound {
		t.Errorf("the idle pod's measurement was up to %.1f s old, want at most %.0f s: the sweep walks every part", idleAgeMax, bound)
	}
	if limit := (2*signalInterval + time.Second).Seconds(); idleUnchangedLagMax > limit {
		t.Errorf("the idle pod's unchanged mark was up to %.1f s old, want at most %.0f s: every cycle reads it", idleUnchangedLagMax, limit)
	}
	if unchangedAfter <= unchangedBefore {
		t.Errorf("emptydir_exporter_walks_unchanged_total did not rise (%v → %v)", unchangedBefore, unchangedAfter)
	}

	// The holes: space the pod's cgroup never charges, added right after a walk of the idle pod.
	// A metadata page of the pod's directory charged to its cgroup may turn dirty at the
	// filesystem's next journal commit and change the mark by chance (docs/change-signal.md):
	// each hole is tried until a cycle vouched the pod unchanged after it, so that the sweep,
	// not that chance, is what published it.
	dir := part.EmptyDirPath(c.KubeletRootDir(), string(idle.UID), "data")
	for _, hole := range []struct {
		name  string
		write func(path string) error
	}{
		{"fallocate", func(path string) error { return fallocate(path, 2<<20) }},
		{"written from outside the pod's cgroup", func(path string) error { return os.WriteFile(path, make([]byte, 2<<20), 0o644) }},
	} {
		exercised := false
		for try := 0; try < 3 && !exercised; try++ {
			framework.Eventually(t, signalSweep+10*time.Second, 200*time.Millisecond, "a walk of the idle pod", func() (bool, string) {
				age, ok := sample(scrape(), "emptydir_measurement_age_seconds", idle)
				return ok && age < signalInterval.Seconds(), fmt.Sprintf("age %.1f s", age)
			})
			at := time.Now()
			if err := hole.write(filepath.Join(dir, fmt.Sprintf("hole-%d-%d", len(hole.name), try))); err != nil {
				t.Fatalf("%s: %v", hole.name, err)
			}
			want := framework.DuBytes(t, dir)
			framework.Eventually(t, signalSweep+2*signalInterval+5*time.Second, 500*time.Millisecond, hole.name+" published", func() (bool, string) {
				fams := scrape()
				if ts, ok := sample(fams, "emptydir_measurement_unchanged_timestamp_seconds", idle); ok && ts > float64(at.UnixNano())/1e9 {
					exercised = true
				}
				used, _ := sample(fams, "emptydir_used_bytes", idle)
				return int64(used) == want, fmt.Sprintf("used %v, du %d", used, want)
			})
			t.Logf("%s (try %d): 2 MiB published after %.1f s; a cycle vouched the pod unchanged in between: %v",
				hole.name, try+1, time.Since(at).Seconds(), exercised)
		}
		if !exercised {
			t.Errorf("%s: in 3 tries no cycle vouched the idle pod unchanged after the write: the hole was never exercised", hole.name)
		}
	}

	// A container restart: the container writes 2 MiB and exits at once, and the runtime
	// removes its cgroup, usually before the next cycle reads the pod's mark. Were the
	// container's counts gone with its cgroup, the mark would be back at its value before the
	// write and every cycle would vouch the stale figure unchanged until the sweep; they stay
	// in the pod's cgroup, so the mark moves and the next cycle walks.
	at := trigger(t, c, restarter)
	var vouchedStale bool
	framework.Eventually(t, signalSweep+2*signalInterval+5*time.Second, 200*time.Millisecond, "the restarted container's 2 MiB published", func() (bool, string) {
		fams := scrape()
		used, _ := sample(fams, "emptydir_used_bytes", restarter)
		if ts, ok := sample(fams, "emptydir_measurement_unchanged_timestamp_seconds", restarter); ok && ts > float64(at.Add(time.Second).UnixNano())/1e9 && used < 2<<20 {
			vouchedStale = true
		}
		return used >= 2<<20, fmt.Sprintf("used %v", used)
	})
	published := time.Since(at)
	// The container must have exited (and been restarted) for the case to be the one meant.
	var restarts int32
	framework.Eventually(t, 30*time.Second, 200*time.Millisecond, "the container exited with 1", func() (bool, string) {
		p, err := c.Client().CoreV1().Pods(ns).Get(ctx, restarter.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if st := p.Status.ContainerStatuses; len(st) == 1 && st[0].LastTerminationState.Terminated != nil {
			restarts = st[0].RestartCount
			return st[0].LastTerminationState.Terminated.ExitCode == 1, fmt.Sprintf("exit code %d", st[0].LastTerminationState.Terminated.ExitCode)
		}
		return false, fmt.Sprintf("statuses %+v", p.Status.ContainerStatuses)
	})
	t.Logf("container restart: 2 MiB written, the container exited, published %.1f s after the trigger (restarts %d)", published.Seconds(), restarts)
	if vouchedStale {
		t.Errorf("after the container wrote 2 MiB and exited, a cycle vouched its pod's stale figure unchanged: the removed cgroup took its counts")
	}
	if limit := 2*signalInterval + 2*time.Second; published > limit {
		t.Errorf("the restarted container's write was published after %v, want within %v: the pod's mark did not move", published, limit)
	}

	// Metadata only: 3000 empty files. Whether the mark moves (directory blocks charged to
	// the pod) or not, the figure is published within the sweep bound of the last file.
	metaDir := part.EmptyDirPath(c.KubeletRootDir(), string(meta.UID), "data")
	trigger(t, c, meta)
	framework.Eventually(t, 30*time.Second, 100*time.Millisecond, "3000 empty files created", func() (bool, string) {
		entries, err := os.ReadDir(filepath.Join(metaDir, "m"))
		return err == nil && len(entries) == 3000, fmt.Sprintf("%d files, %v", len(entries), err)
	})
	created := time.Now()
	want := framework.DuBytes(t, metaDir)
	framework.Eventually(t, signalSweep+2*signalInterval+5*time.Second, 500*time.Millisecond, "3000 empty files published", func() (bool, string) {
		used, _ := sample(scrape(), "emptydir_used_bytes", meta)
		return int64(used) == want, fmt.Sprintf("used %v, du %d", used, want)
	})
	t.Logf("metadata only: 3000 empty files (%d B with their directory) published %.1f s after the last", want, time.Since(created).Seconds())
}

// trigger opens pod's /test/go FIFO (in its emptyDir, from the node) and writes a line,
// which the pod's script waits for; it returns when the line was written.
func trigger(t *testing.T, c *cluster.Cluster, pod *corev1.Pod) time.Time {
	t.Helper()
	fifo := filepath.Join(part.EmptyDirPath(c.KubeletRootDir(), string(pod.UID), "data"), "go")
	var at time.Time
	framework.Eventually(t, 30*time.Second, 100*time.Millisecond, "a reader on "+fifo, func() (bool, string) {
		// O_NONBLOCK: ENXIO until the pod's read has the FIFO open.
		f, err := os.OpenFile(fifo, os.O_WRONLY|unix.O_NONBLOCK, 0)
		if err != nil {
			return false, err.Error()
		}
		defer f.Close()
		if _, err := f.WriteString("go\n"); err != nil {
			return false, err.Error()
		}
		at = time.Now()
		return true, ""
	})
	return at
}

// signalPod is a pod on the node with a disk emptyDir "data" (sizeLimit 64Mi: guarded, so
// walked every cycle without the signal) and a shell running script in it.
func signalPod(c *cluster.Cluster, ns, name, script string) *corev1.Pod {
	p := c.SeedPod(ns, name)
	limit := resource.MustParse("64Mi")
	p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &limit}}}}
	p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/test"}}
	p.Spec.Containers[0].Command = []string{"sh", "-c", script}
	return p
}

// fallocate allocates size bytes to a new file at path without writing a page.
func fallocate(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Fallocate(int(f.Fd()), 0, 0, size); err != nil {
		return fmt.Errorf("fallocate %s: %w", path, err)
	}
	return f.Close()
}

// marksByOutcome is emptydir_exporter_change_marks_total by outcome, for messages.
func marksByOutcome(fams map[string]*dto.MetricFamily) map[string]float64 {
	out := map[string]float64{}
	for _, m := range fams["emptydir_exporter_change_marks_total"].GetMetric() {
		out[labelValue(m, "outcome")] = m.GetCounter().GetValue()
	}
	return out
}
