package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/emptydir-guard/emptydir-guard/internal/docsection"
	"github.com/emptydir-guard/emptydir-guard/internal/testbin"
	"github.com/emptydir-guard/emptydir-guard/test/cluster"
	"github.com/emptydir-guard/emptydir-guard/test/framework"
	"github.com/emptydir-guard/emptydir-guard/test/monitoring"
)

// BenchmarkRace's sizes: its own cases write 4 MiB against a 1Mi limit (the copy-up: the image's
// 1.9 MB busybox); the rotated logs fill 11 MiB of logs under a 12Mi limit, which the kubelet
// rotates at its default containerLogMaxSize (10Mi), then 2 MiB more.
const (
	raceLimit          = "1Mi"
	raceMiB            = 4
	raceLogLimit       = "12Mi"
	raceLogRotateMiB   = 11
	raceLogAfterMiB    = 2
	raceLogLine        = 1000 // bytes per line of a log burst, newline included
	raceSamplesEnv     = "EMPTYDIR_GUARD_RACE_SAMPLES"
	raceDefaultSamples = 5
	raceEvictDeadline  = 5 * time.Minute
)

// raceCase is one way over a limit that both enforcers see.
type raceCase struct {
	// slug names the case's pods; name is its row in the table.
	slug, name string
	// pod builds the case's pod in ns; the writing container is "writer".
	pod func(c *cluster.Cluster, ns, name string) *corev1.Pod
	// prepare, if set, runs once the pod runs (the debug container is added then).
	prepare func(ctx context.Context, c *cluster.Cluster, p *corev1.Pod) error
	// write crosses the limit and returns when the bytes are where both enforcers count them.
	write func(ctx context.Context, c *cluster.Cluster, p *corev1.Pod) (time.Time, error)
	// stays: the pod is under every limit (the six-pod scenario's controls): not timed, and
	// neither enforcer may evict it.
	stays bool
}

// raceCases are the races the guard lost or won narrowly (issue 40), then the kubelet's own
// scenario (lsciPods) pod by pod.
func raceCases() []raceCase {
	dd := func(container, file string, extra ...string) func(context.Context, *cluster.Cluster, *corev1.Pod) (time.Time, error) {
		return func(ctx context.Context, c *cluster.Cluster, p *corev1.Pod) (time.Time, error) {
			args := append([]string{"dd", "if=/dev/zero", "of=" + file, "bs=1M", fmt.Sprint("count=", raceMiB)}, extra...)
			return execEnd(ctx, c, p, container, args...)
		}
	}
	sizeLimited := func(c *cluster.Cluster, ns, name string) *corev1.Pod {
		limit := resource.MustParse(raceLimit)
		return lsciPod{name: name, volume: &corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &limit}}}.build(c, ns)
	}
	limited := func(c *cluster.Cluster, ns, name string) *corev1.Pod {
		return lsciPod{name: name, limit: raceLimit}.build(c, ns)
	}
	cases := []raceCase{
		{slug: "other-container", name: "a limit on another container",
			pod: func(c *cluster.Cluster, ns, name string) *corev1.Pod {
				p := lsciPod{name: name}.build(c, ns)
				other := limited(c, ns, name).Spec.Containers[0]
				other.Name = "limited"
				p.Spec.Containers = append(p.Spec.Containers, other)
				return p
			},
			write: dd("writer", "/fill", "conv=fsync")},
		{slug: "sidecar", name: "a limited sidecar",
			pod: func(c *cluster.Cluster, ns, name string) *corev1.Pod {
				return lsciPod{name: name, limit: raceLimit, sidecar: true}.build(c, ns)
			},
			write: dd("writer", "/fill", "conv=fsync")},
		{slug: "rotated-logs", name: "rotated logs",
			pod:   func(c *cluster.Cluster, ns, name string) *corev1.Pod { return logPod(c, ns, name, raceLogLimit) },
			write: writeRotatedLogs},
		{slug: "fallocate", name: "`fallocate` into a sizeLimit emptyDir", pod: sizeLimited,
			write: func(ctx context.Context, c *cluster.Cluster, p *corev1.Pod) (time.Time, error) {
				return execEnd(ctx, c, p, "writer", "fallocate", "-l", fmt.Sprint(raceMiB<<20), "/data/fill")
			}},
		{slug: "odirect", name: "O_DIRECT writes", pod: sizeLimited, write: dd("writer", "/data/fill", "oflag=direct")},
		{slug: "log-burst", name: "a log burst",
			pod: func(c *cluster.Cluster, ns, name string) *corev1.Pod { return logPod(c, ns, name, raceLimit) },
			write: func(ctx context.Context, c *cluster.Cluster, p *corev1.Pod) (time.Time, error) {
				return logBurst(ctx, c, p, raceMiB<<20)
			}},
		{slug: "debug-container", name: "an ephemeral debug container filling its rootfs", pod: limited,
			prepare: addDebugContainer, write: dd("debugger", "/fill", "conv=fsync")},
		{slug: "copy-up", name: "a copy-up of the 1.9 MB busybox by `chmod` under a 1Mi container limit", pod: limited,
			write: func(ctx context.Context, c *cluster.Cluster, p *corev1.Pod) (time.Time, error) {
				return execEnd(ctx, c, p, "writer", "sh", "-c", "chmod 0775 /bin/busybox && sync")
			}},
	}
	for _, p := range lsciPods() {
		cases = append(cases, raceCase{slug: p.name, name: "six-pod scenario: `" + p.name + "`", stays: p.want == "",
			pod: func(c *cluster.Cluster, ns, name string) *corev1.Pod {
				q := p
				q.name = name
				return q.build(c, ns)
			},
			write: p.write})
	}
	return cases
}

// raceSamples is how many times BenchmarkRace runs each case: raceSamplesEnv, or the default.
func raceSamples(tb testing.TB) int {
	v := os.Getenv(raceSamplesEnv)
	if v == "" {
		return raceDefaultSamples
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		tb.Fatalf("%s=%q: want a positive count", raceSamplesEnv, v)
	}
	return n
}

// BenchmarkRace runs every raceCase raceSamples times on a kubelet that enforces (isolation on,
// its defaults, startTwoEnforcers): per run one pod in the namespace both enforcers act on and
// its twin in the one denied to the remediator, written at the same moment. It prints, per
// case, the guard's timeline from each component's own record beside the kubelet's eviction
// of the twin, with medians and the races the guard won, and writes the table into
// docs/performance.md (section race) when it passes. It runs once whatever b.N is (make
// bench-race passes -benchtime=1x); about a minute a round.
func BenchmarkRace(b *testing.B) {
	requireCluster(b)
	testbin.Path(b, "emptydir-exporter")
	samples := raceSamples(b)
	ctx, cancel := context.WithTimeout(rootCtx, time.Duration(samples)*8*time.Minute+10*time.Minute)
	defer cancel()
	// The caps and the notices' buckets are policy, not latency: lifted so that every pod is
	// evicted as fast as the chain allows. The exporter notifies the remediator, as the chart
	// installs it.
	e := startTwoEnforcersWith(ctx, b, "race-both-", "race-kubelet-", framework.StackOptions{Notify: true,
		RemediatorArgs: []string{"--eviction.max-global=0", "--eviction.max-per-node=0", "--eviction.max-per-namespace=0",
			"--notice.max-per-namespace=1000", "--notice.max-per-node=1000"}})
	am := watchAlertmanagerReceipts(ctx, e.s.Mon)
	defer am.Stop()

	cases := raceCases()
	got := make([][]raceSample, len(cases))
	for round := range samples {
		for i, s := range raceRound(ctx, b, e, am, cases, round) {
			got[i] = append(got[i], s)
		}
		if b.Failed() {
			return
		}
	}
	var rows []raceRow
	for i, rc := range cases {
		if !rc.stays {
			rows = append(rows, summarizeRace(rc.name, got[i]))
		}
	}
	body := fmt.Sprintf("Seconds after the end of the write, median over %d run(s) of each case (a stage seen in fewer runs says in how many), on one cluster whose kubelet enforces (`localStorageCapacityIsolation` on, its defaults); the shipped timings: exporter interval %s, its notices to the remediator on, scrape 5s, the remediation rules evaluated every 2s, Alertmanager group_wait 1s, no eviction caps. The first eight cases write %d MiB against a %s limit (rotated logs: 11 MiB under 12Mi, rotated by the kubelet, then 2 MiB more); the six-pod scenario's are `TestLocalStorageEvictionTimes`' (10Mi limits, 11 MiB).\n\n",
		samples, framework.ExporterInterval, raceMiB, raceLimit) + raceTable(rows)
	b.Log("\n" + body)
	if b.Failed() {
		return
	}
	if err := docsection.Replace("../../docs/performance.md", "race", "make bench-race: BenchmarkRace", body); err != nil {
		b.Error(err)
	}
}

// raceRound runs every case once, in both namespaces at once, and returns a sample per case
// (zero for the cases that stay).
func raceRound(ctx context.Context, b *testing.B, e *twoEnforcers, am *amReceipts, cases []raceCase, round int) []raceSample {
	c := e.c
	type run struct {
		cs      int // index into cases
		kubelet bool
		pod     *corev1.Pod
		tr      *framework.PodTracker
		end     time.Time
		err     error
	}
	var runs []*run
	for i, rc := range cases {
		for _, kubelet := range []bool{false, true} {
			ns := e.ours
			if kubelet {
				ns = e.kubeletOnly
			}
			p := rc.pod(c, ns, fmt.Sprintf("%s-%d", rc.slug, round))
			if _, err := c.Client().CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
				b.Fatalf("create pod %s/%s: %v", ns, p.Name, err)
			}
			runs = append(runs, &run{cs: i, kubelet: kubelet, pod: p})
		}
	}
	for _, r := range runs {
		wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		running, err := c.WaitForPodPhase(wctx, r.pod.Namespace, r.pod.Name, corev1.PodRunning)
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		r.pod = running
		if prep := cases[r.cs].prepare; prep != nil {
			if err := prep(ctx, c, r.pod); err != nil {
				b.Fatal(err)
			}
		}
		r.tr = framework.TrackPod(ctx, c, r.pod)
		defer r.tr.Stop()
	}

	// All writes at once: both enforcers face the same node state, as in the kubelet's test.
	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Go(func() { r.end, r.err = cases[r.cs].write(ctx, c, r.pod) })
	}
	wg.Wait()
	for _, r := range runs {
		if r.err != nil {
			b.Fatalf("%s: %v", cases[r.cs].name, r.err)
		}
	}
	deadline := time.Now().Add(raceEvictDeadline)
	for _, r := range runs {
		for !cases[r.cs].stays && r.tr.Evicted().IsZero() && time.Now().Before(deadline) && ctx.Err() == nil {
			time.Sleep(250 * time.Millisecond)
		}
	}

	out := make([]raceSample, len(cases))
	for _, r := range runs {
		rc := cases[r.cs]
		id := r.pod.Namespace + "/" + r.pod.Name
		byKubelet := evictedByKubelet(r.tr)
		logRaceRun(b, id, r.end, r.tr, byKubelet)
		switch {
		case rc.stays:
			if !r.tr.Evicted().IsZero() {
				b.Errorf("%s (%s), under every limit, was evicted (by the kubelet: %v)", id, rc.name, byKubelet)
			}
		case r.kubelet && byKubelet:
			out[r.cs].kubelet = r.tr.Evicted().Sub(r.end)
		case r.kubelet:
			b.Logf("%s (%s): the kubelet did not evict it within %s", id, rc.name, raceEvictDeadline)
		case r.tr.Evicted().IsZero():
			b.Errorf("%s (%s): evicted by nobody within %s", id, rc.name, raceEvictDeadline)
		default:
			out[r.cs].guard, out[r.cs].dated = raceTimeline(ctx, b, c, e.s, am, string(r.pod.UID), r.end)
			out[r.cs].notified = noticeArrival(c, e.s, string(r.pod.UID), r.end)
			out[r.cs].guard.evicted = r.tr.Evicted().Sub(r.end)
			out[r.cs].guardWon = !byKubelet
			out[r.cs].raced = true
			if !byKubelet {
				// The guard evicts only through every stage of its path (the notice's, or the
				// alert's without one): each one it won without a record of is a record missed,
				// not a stage skipped.
				for _, st := range raceStages {
					if _, ok := st.at(out[r.cs]); !ok && st.on(out[r.cs]) {
						b.Errorf("%s (%s): evicted by the guard, but no record of its stage %q", id, rc.name, st.name)
					}
				}
				break
			}
			// A race lost: what the remediator did about the pod says which stage came late.
			b.Logf("%s (%s): the kubelet evicted it first; the remediator's log on it:\n%s", id, rc.name,
				linesWith(c.LogPath(e.s.RemediatorLog), r.pod.Namespace, r.pod.Name))
		}
	}
	// The round's pods go before the next round's come: the node holds 50.
	zero := int64(0)
	for _, r := range runs {
		_ = c.Client().CoreV1().Pods(r.pod.Namespace).Delete(ctx, r.pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	}
	framework.Eventually(b, 2*time.Minute, time.Second, "the round's pods gone", func() (bool, string) {
		left := 0
		for _, ns := range []string{e.ours, e.kubeletOnly} {
			l, err := c.Client().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err.Error()
			}
			left += len(l.Items)
		}
		return left == 0, fmt.Sprintf("%d pods left", left)
	})
	return out
}

// logRaceRun logs what the pod's tracker saw, as offsets from the end of its write: the
// evidence behind who evicted it.
func logRaceRun(b *testing.B, id string, end time.Time, tr *framework.PodTracker, byKubelet bool) {
	terminating, failed, gone, reason, msg := tr.Snapshot()
	at := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return fmt.Sprintf("%.1fs", t.Sub(end).Seconds())
	}
	b.Logf("%s: terminating %s, Failed %s (%s: %q), gone %s; by the kubelet: %v", id, at(terminating), at(failed), reason, msg, at(gone), byKubelet)
}

// linesWith is the lines of the log at path that hold every one of subs, at most 20 (the last).
func linesWith(path string, subs ...string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	var got []string
next:
	for line := range strings.SplitSeq(string(data), "\n") {
		for _, s := range subs {
			if !strings.Contains(line, s) {
				continue next
			}
		}
		got = append(got, line)
	}
	return strings.Join(got[max(0, len(got)-20):], "\n")
}

// overLimitSeries are the exporter's series that the remediation alerts read, volume, pod and
// container; each is published only while over its limit.
const overLimitSeries = `emptydir_over_limit_bytes|emptydir_pod_ephemeral_storage_over_limit_bytes|emptydir_container_ephemeral_storage_over_limit_bytes`

// raceTimeline reads the guard's chain for the pod uid from each part's own record, as offsets
// from end (zero: not seen): the first scrape of an over-limit series and the age of the
// measurement it carried (Prometheus' raw samples), the first firing evaluation (ALERTS),
// Alertmanager's receipt (am), the webhook's arrival (the recording proxy) and the
// exporter's live measurement (its log). dated is whether that first over-limit scrape carried
// its measurement's age: without it, when the measurement was taken is not known.
func raceTimeline(ctx context.Context, b *testing.B, c *cluster.Cluster, s *framework.Stack, am *amReceipts, uid string, end time.Time) (row timing, dated bool) {
	over, err := s.Mon.Query(ctx, fmt.Sprintf(`{__name__=~%q,job=%q,uid=%q}[1h]`, overLimitSeries, triggerJob, uid))
	if err != nil {
		b.Error(err)
	}
	var first time.Time
	var firstOf map[string]string
	for _, smp := range over {
		for _, p := range smp.Values {
			if p.Value > 0 && (first.IsZero() || p.Time.Before(first)) {
				first, firstOf = p.Time, smp.Metric
			}
		}
	}
	if !first.IsZero() {
		row.metric = first.Sub(end)
		row.ageAtScrape, dated = ageInScrape(ctx, b, s, firstOf, first)
	}
	if at, ok := framework.FirstSample(ctx, s.Mon, fmt.Sprintf(`ALERTS{alertstate="firing",remediation="evict",uid=%q}[1h]`, uid), 0); ok {
		row.alert = at.Sub(end)
	}
	if at := am.At(uid); !at.IsZero() {
		row.amSeen = at.Sub(end)
	}
	if hs := s.Recorder.ForUID(uid); len(hs) > 0 {
		row.webhook = hs[0].Received.Sub(end)
	}
	if at, ok := framework.LogLineTime(c.LogPath(s.ExporterLog), `msg="live measurement"`, "uid="+uid); ok {
		row.recheck = at.Sub(end)
	}
	return row, dated
}

// triggerJob is the scrape job of the exporter's trigger collector: the over-limit series and,
// since the limited parts' ages are published beside them, the ages that date them.
const triggerJob = "emptydir-exporter"

// ageInScrape is the measurement age that the scrape at at carried beside over, an over-limit
// series' labels: the sample of the same job and target at the same timestamp. A volume's
// measurement has its own age; a pod's and its containers' share the pod's. ok is false (and
// the bench fails) when that scrape had none: the value would be dated by nothing.
func ageInScrape(ctx context.Context, b *testing.B, s *framework.Stack, over map[string]string, at time.Time) (age float64, ok bool) {
	family, sel := "emptydir_pod_ephemeral_storage_measurement_age_seconds", ""
	if over["__name__"] == "emptydir_over_limit_bytes" {
		family, sel = "emptydir_measurement_age_seconds", fmt.Sprintf(`,volume=%q`, over["volume"])
	}
	ages, err := s.Mon.Query(ctx, fmt.Sprintf(`%s{job=%q,instance=%q,uid=%q%s}[1h]`, family, over["job"], over["instance"], over["uid"], sel))
	if err != nil {
		b.Errorf("the age of %s's measurement: %v", over["uid"], err)
		return 0, false
	}
	for _, smp := range ages {
		for _, p := range smp.Values {
			if p.Time.Equal(at) {
				return p.Value, true
			}
		}
	}
	b.Errorf("pod %s: no %s in the scrape of %v that carried its first over-limit sample (%s)", over["uid"], family, at, over["__name__"])
	return 0, false
}

// amReceipts records, per pod UID, when Alertmanager took its first remediation alert: the
// earliest updatedAt of its alerts when a 250 ms poll of /api/v2/alerts first lists it (a pod
// over both its own and a container's limit has two; the poll's own time if none has one).
type amReceipts struct {
	poll *framework.FirstSeen
	mu   sync.Mutex
	at   map[string]time.Time
}

func watchAlertmanagerReceipts(ctx context.Context, mon *monitoring.Stack) *amReceipts {
	r := &amReceipts{at: map[string]time.Time{}}
	r.poll = framework.PollFirstSeen(ctx, 250*time.Millisecond, func(ctx context.Context) ([]string, error) {
		alerts, err := mon.AlertmanagerAlerts(ctx, `remediation="evict"`)
		uids := make([]string, 0, len(alerts))
		r.mu.Lock()
		defer r.mu.Unlock()
		first := map[string]time.Time{} // this poll's earliest updatedAt of a uid not listed before
		for _, a := range alerts {
			uid := a.Labels["uid"]
			uids = append(uids, uid)
			if _, seen := r.at[uid]; seen {
				continue
			}
			if at, ok := first[uid]; !ok || (!a.UpdatedAt.IsZero() && (at.IsZero() || a.UpdatedAt.Before(at))) {
				first[uid] = a.UpdatedAt
			}
		}
		maps.Copy(r.at, first)
		return uids, err
	})
	return r
}

// At is when Alertmanager took the pod's first remediation alert; zero when it never did.
func (r *amReceipts) At(uid string) time.Time {
	r.mu.Lock()
	at := r.at[uid]
	r.mu.Unlock()
	if at.IsZero() {
		return r.poll.At(uid)
	}
	return at
}

// Stop ends the polling.
func (r *amReceipts) Stop() { r.poll.Stop() }

// execEnd runs cmd in the pod's container and returns when it ended.
func execEnd(ctx context.Context, c *cluster.Cluster, p *corev1.Pod, container string, cmd ...string) (time.Time, error) {
	if _, stderr, err := c.ExecInPod(ctx, p.Namespace, p.Name, container, cmd...); err != nil {
		return time.Time{}, fmt.Errorf("%v in %s/%s: %w (%s)", cmd, p.Namespace, p.Name, err, stderr)
	}
	return time.Now(), nil
}

// logPod is a pod whose container "writer", limited to limit, copies whatever is written into
// its FIFO /tmp/log to its stdout: its log, which the kubelet and containerd keep on the node.
func logPod(c *cluster.Cluster, ns, name, limit string) *corev1.Pod {
	p := lsciPod{name: name, limit: limit}.build(c, ns)
	p.Spec.Containers[0].Command = []string{"sh", "-c", "mkfifo /tmp/log && echo started && while true; do cat /tmp/log; done"}
	return p
}

// logBurst has the log pod print n bytes of 1000-byte lines at once and returns when its log
// files on the node stopped growing with at least n bytes.
func logBurst(ctx context.Context, c *cluster.Cluster, p *corev1.Pod, n int) (time.Time, error) {
	before, err := logBytes(c, p)
	if err != nil {
		return time.Time{}, err
	}
	script := fmt.Sprintf("yes %s | head -c %d > /tmp/log", strings.Repeat("x", raceLogLine-1), n)
	if _, err := execEnd(ctx, c, p, "writer", "sh", "-c", script); err != nil {
		return time.Time{}, err
	}
	// The shim writes the lines after the FIFO took them: the end is when the files hold them.
	var last int64
	var lastAt time.Time
	for stop := time.Now().Add(time.Minute); time.Now().Before(stop); time.Sleep(20 * time.Millisecond) {
		size, err := logBytes(c, p)
		if err != nil {
			return time.Time{}, err
		}
		now := time.Now()
		if size != last {
			last, lastAt = size, now
			continue
		}
		if size-before >= int64(n) && now.Sub(lastAt) >= 100*time.Millisecond {
			return lastAt, nil
		}
	}
	return time.Time{}, fmt.Errorf("%s/%s: its logs hold %d bytes more, want %d", p.Namespace, p.Name, last-before, n)
}

// writeRotatedLogs fills the log pod's log past the kubelet's containerLogMaxSize, waits for the
// kubelet to rotate it, then writes the rest: the pod is over its limit with most of its logs
// in the rotated file.
func writeRotatedLogs(ctx context.Context, c *cluster.Cluster, p *corev1.Pod) (time.Time, error) {
	if _, err := logBurst(ctx, c, p, raceLogRotateMiB<<20); err != nil {
		return time.Time{}, err
	}
	dir := podLogDir(c, p)
	for stop := time.Now().Add(2 * time.Minute); ; time.Sleep(250 * time.Millisecond) {
		rotated, _ := filepath.Glob(filepath.Join(dir, "*.log.*"))
		if len(rotated) > 0 {
			break
		}
		if time.Now().After(stop) {
			return time.Time{}, fmt.Errorf("%s/%s: the kubelet did not rotate %s within 2 minutes", p.Namespace, p.Name, dir)
		}
	}
	return logBurst(ctx, c, p, raceLogAfterMiB<<20)
}

// podLogDir is the directory of the log pod's container "writer" below the kubelet's podLogsDir.
func podLogDir(c *cluster.Cluster, p *corev1.Pod) string {
	return filepath.Join(c.PodLogsDir(), p.Namespace+"_"+p.Name+"_"+string(p.UID), "writer")
}

// logBytes adds up the sizes of the files in the log pod's container log directory.
func logBytes(c *cluster.Cluster, p *corev1.Pod) (int64, error) {
	entries, err := os.ReadDir(podLogDir(c, p))
	if err != nil {
		return 0, err
	}
	var n int64
	for _, e := range entries {
		if info, err := e.Info(); err == nil && info.Mode().IsRegular() {
			n += info.Size()
		}
	}
	return n, nil
}

// addDebugContainer adds the ephemeral container "debugger" (kubectl debug's: no limits
// allowed) to p and waits until it runs.
func addDebugContainer(ctx context.Context, c *cluster.Cluster, p *corev1.Pod) error {
	got, err := c.Client().CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	got.Spec.EphemeralContainers = append(got.Spec.EphemeralContainers, corev1.EphemeralContainer{
		EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debugger", Image: cluster.BusyboxImage,
			ImagePullPolicy: corev1.PullNever, TerminationMessagePolicy: corev1.TerminationMessageReadFile,
			Command: []string{"sh", "-c", "exec sleep 2147483647"}}})
	if _, err := c.Client().CoreV1().Pods(p.Namespace).UpdateEphemeralContainers(ctx, p.Name, got, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("add a debug container to %s/%s: %w", p.Namespace, p.Name, err)
	}
	for stop := time.Now().Add(2 * time.Minute); time.Now().Before(stop); time.Sleep(250 * time.Millisecond) {
		got, err := c.Client().CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, s := range got.Status.EphemeralContainerStatuses {
			if s.Name == "debugger" && s.State.Running != nil {
				return nil
			}
		}
	}
	return fmt.Errorf("%s/%s: the debug container did not run within 2 minutes", p.Namespace, p.Name)
}

// noticeArrival is when the exporter's notice about the pod uid reached the remediator (its
// log), as an offset from end; zero when none did.
func noticeArrival(c *cluster.Cluster, s *framework.Stack, uid string, end time.Time) time.Duration {
	if at, ok := framework.LogLineTime(c.LogPath(s.RemediatorLog), `msg="notice received"`, "uid="+uid); ok {
		return at.Sub(end)
	}
	return 0
}

// raceSample is one run of a case: the guard's timeline for the pod both enforcers race for
// (raced: someone evicted it), whether the guard was first, and the kubelet's eviction of the
// twin it enforces alone (0: none within the deadline).
type raceSample struct {
	guard timing
	// notified is when the exporter's notice reached the remediator (0: none did).
	notified time.Duration
	// dated: the scrape of the first over-limit sample carried its measurement's age
	// (guard.ageAtScrape); without it the measured stage is not known.
	dated    bool
	raced    bool
	guardWon bool
	kubelet  time.Duration
}

// raceStages are the guard's timeline up to the live re-check, each an offset from the end of
// the write; a zero offset is a stage not seen (the kubelet's eviction may come first).
var raceStages = []raceStage{
	{"measured", path{alert: true}, func(s raceSample) (time.Duration, bool) {
		return s.guard.metric - secs(s.guard.ageAtScrape), s.guard.metric != 0 && s.dated
	}},
	{"notified", path{notice: true}, func(s raceSample) (time.Duration, bool) { return s.notified, s.notified != 0 }},
	{"scraped", path{alert: true}, func(s raceSample) (time.Duration, bool) { return s.guard.metric, s.guard.metric != 0 }},
	{"rule firing", path{alert: true}, func(s raceSample) (time.Duration, bool) { return s.guard.alert, s.guard.alert != 0 }},
	{"Alertmanager", path{alert: true}, func(s raceSample) (time.Duration, bool) { return s.guard.amSeen, s.guard.amSeen != 0 }},
	{"webhook", path{alert: true}, func(s raceSample) (time.Duration, bool) { return s.guard.webhook, s.guard.webhook != 0 }},
	{"live re-check", path{alert: true, notice: true}, func(s raceSample) (time.Duration, bool) { return s.guard.recheck, s.guard.recheck != 0 }},
}

// raceStage is a stage of the guard's timeline and the paths to the remediator it is on: the
// alert's (scrape, rules, Alertmanager, webhook) and the exporter's notice.
type raceStage struct {
	name string
	path path
	at   func(raceSample) (time.Duration, bool)
}

type path struct{ alert, notice bool }

// on reports whether a win of s must have passed the stage: a notice's when the remediator had
// one (the alerts may come after the eviction), the alert's otherwise.
func (st raceStage) on(s raceSample) bool {
	if s.notified != 0 {
		return st.path.notice
	}
	return st.path.alert
}

// raceRow is a case's line of the table, its cells formatted.
type raceRow struct {
	name           string
	stages         []string // in raceStages' order
	evicted        string   // the guard's evictions, over the races it won
	kubelet        string   // the kubelet alone, on the twins
	ratio          string   // evicted / kubelet, medians
	won, raced, of int      // races won, races run to an eviction, runs
}

// median is the middle of ds (the mean of the two middle ones for an even count); ok is false
// for none.
func median(ds []time.Duration) (m time.Duration, ok bool) {
	if len(ds) == 0 {
		return 0, false
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	if n := len(s); n%2 == 1 {
		return s[n/2], true
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2, true
}

// medianCell is ds' median in seconds, with how many of the runs it is of when fewer than of
// saw it, "-" for none.
func medianCell(ds []time.Duration, of int) string {
	m, ok := median(ds)
	switch {
	case !ok:
		return "-"
	case len(ds) < of:
		return fmt.Sprintf("%.1f (%d/%d)", m.Seconds(), len(ds), of)
	default:
		return fmt.Sprintf("%.1f", m.Seconds())
	}
}

// summarizeRace is the row of the case name from its samples.
func summarizeRace(name string, samples []raceSample) raceRow {
	row := raceRow{name: name, of: len(samples)}
	var won, kubelet []time.Duration
	for _, s := range samples {
		if s.raced {
			row.raced++
		}
		if s.raced && s.guardWon {
			row.won++
			won = append(won, s.guard.evicted)
		}
		if s.kubelet != 0 {
			kubelet = append(kubelet, s.kubelet)
		}
	}
	for _, st := range raceStages {
		var ds []time.Duration
		for _, s := range samples {
			if v, ok := st.at(s); s.raced && ok {
				ds = append(ds, v)
			}
		}
		row.stages = append(row.stages, medianCell(ds, row.raced))
	}
	row.evicted = medianCell(won, row.raced)
	row.kubelet = medianCell(kubelet, row.of)
	row.ratio = "-"
	mw, okw := median(won)
	mk, okk := median(kubelet)
	if okw && okk && mk > 0 {
		row.ratio = fmt.Sprintf("%.2f", mw.Seconds()/mk.Seconds())
	}
	return row
}

// raceTable renders the rows as one Markdown table, a case a line.
func raceTable(rows []raceRow) string {
	var b strings.Builder
	b.WriteString("| case |")
	for _, st := range raceStages {
		b.WriteString(" " + st.name + " |")
	}
	b.WriteString(" evicted by the guard | kubelet alone | guard / kubelet | races won |\n|" + strings.Repeat(" --- |", len(raceStages)+5) + "\n")
	for _, r := range rows {
		won := fmt.Sprintf("%d of %d", r.won, r.raced)
		if r.raced < r.of {
			won += fmt.Sprintf(" (%d not evicted)", r.of-r.raced)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", r.name, strings.Join(r.stages, " | "), r.evicted, r.kubelet, r.ratio, won)
	}
	return b.String()
}
