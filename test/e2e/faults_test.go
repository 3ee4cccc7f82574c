package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/emptydir-guard/emptydir-guard/exporter/part"
	"github.com/emptydir-guard/emptydir-guard/internal/testbin"
	"github.com/emptydir-guard/emptydir-guard/remediator"
	"github.com/emptydir-guard/emptydir-guard/test/cluster"
	"github.com/emptydir-guard/emptydir-guard/test/framework"
)

// The big volumes: directories of bigFilesPerDirectory empty files each, walked by an exporter held
// to exporterMillicores of CPU (its request in deploy/, what it gets on a busy node). Sized
// so that one honest live walk takes several seconds: big-under's (the faults' witness) a
// few, big-over's (the freshness case) well over the 5 s the remediator once allowed for a
// whole live measurement.
const (
	bigUnderDirectories  = 100
	bigOverDirectories   = 140
	bigFilesPerDirectory = 1000
	exporterMillicores   = 50
)

// faultEnv is what the fault cases share: one namespace, one exporter (which a case may kill
// and start again) and one remediator with its default measurement flags and the production
// setup (leader election, the ledger in a ConfigMap).
type faultEnv struct {
	t        *testing.T
	c        *cluster.Cluster
	ctx      context.Context
	ns       string
	token    string
	bin      string
	args     []string
	expAddr  string
	remAddr  string
	exporter *exec.Cmd
	rows     []faultRow
}

// faultRow is one line of the table in docs/reliability.md.
type faultRow struct{ fault, checked, result string }

func (f *faultEnv) row(fault, checked, format string, args ...any) {
	f.rows = append(f.rows, faultRow{fault, checked, fmt.Sprintf(format, args...)})
}

// startExporter starts the exporter, holds it to exporterMillicores of CPU and returns once it
// listens (not once it is ready: a restarted exporter is watched while it gets ready).
func (f *faultEnv) startExporter(t *testing.T) {
	t.Helper()
	cmd := f.c.Command(context.Background(), f.bin, f.args...)
	name := "exporter-" + f.ns
	if err := f.c.StartProcess(name, cmd); err != nil {
		t.Fatalf("starting the exporter: %v", err)
	}
	undo, err := f.c.LimitCPU(cmd.Process.Pid, name, exporterMillicores)
	if err != nil {
		_ = cmd.Process.Kill()
		t.Fatal(err)
	}
	f.exporter = cmd
	f.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if err := undo(); err != nil {
			t.Error(err)
		}
	})
	framework.Eventually(t, 60*time.Second, 100*time.Millisecond, "exporter listens", func() (bool, string) {
		resp, err := f.c.HTTPClient(nil).Get("http://" + f.expAddr + "/healthz")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return true, ""
	})
}

// killExporter SIGKILLs the exporter and waits until its port is closed.
func (f *faultEnv) killExporter(t *testing.T) {
	t.Helper()
	if err := f.exporter.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("SIGKILL exporter: %v", err)
	}
	framework.Eventually(t, 30*time.Second, 100*time.Millisecond, "exporter gone", func() (bool, string) {
		resp, err := f.c.HTTPClient(nil).Get("http://" + f.expAddr + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err != nil, "still answers"
	})
}

// deliver posts the EmptyDirOverLimit alert of pod's volume "empty" once. A payload handled by
// the leader answers one alert result; a standby's refusal answers none (res is then zero).
func (f *faultEnv) deliver(pod *corev1.Pod) (code int, res remediator.AlertResult, desc string, err error) {
	code, wr, raw, err := framework.PostWebhook(f.ctx, f.c, f.remAddr, f.token, framework.OverLimitPayload(f.c.NodeName(), pod.Namespace, pod.Name, string(pod.UID), "empty"))
	if err != nil {
		return 0, res, "", err
	}
	f.t.Logf("webhook %s → %d %s", pod.Name, code, strings.TrimSpace(raw))
	switch {
	case len(wr.Alerts) == 1:
		res = wr.Alerts[0]
		desc = fmt.Sprintf("%d %s/%s", code, res.Outcome, res.Reason)
	case code >= 500 && len(wr.Alerts) == 0:
		desc = fmt.Sprintf("%d %q", code, wr.Error)
	default:
		return code, res, "", fmt.Errorf("answer %d %s: want one alert result, or a 5xx refusal", code, raw)
	}
	return code, res, desc, nil
}

// deliverUntilDone retries a delivery as Alertmanager does, while the answer is 5xx, and
// returns the final alert result and the retryable answers before it.
func (f *faultEnv) deliverUntilDone(t *testing.T, pod *corev1.Pod, within time.Duration) (remediator.AlertResult, []string) {
	t.Helper()
	var refused []string
	var res remediator.AlertResult
	err := wait.PollUntilContextTimeout(f.ctx, time.Second, within, true, func(context.Context) (bool, error) {
		code, r, desc, err := f.deliver(pod)
		switch {
		case err != nil:
			refused = append(refused, err.Error())
		case code == http.StatusOK:
			res = r
			return true, nil
		case code < 500:
			return false, fmt.Errorf("%s, want 200 or 5xx", desc)
		default:
			refused = append(refused, desc)
		}
		return false, nil
	})
	switch {
	case wait.Interrupted(err):
		t.Fatalf("delivery for %s not done within %s (%v); answers: %v", pod.Name, within, err, refused)
	case err != nil:
		t.Fatalf("delivery for %s: %v", pod.Name, err)
	}
	return res, refused
}

// asyncDeliver posts the alert of pod in the background; the channel yields the answer.
func (f *faultEnv) asyncDeliver(pod *corev1.Pod) <-chan delivery {
	ch := make(chan delivery, 1)
	go func() {
		start := time.Now()
		code, res, desc, err := f.deliver(pod)
		ch <- delivery{code, res, desc, err, start, time.Now()}
	}()
	return ch
}

type delivery struct {
	code       int
	res        remediator.AlertResult
	desc       string
	err        error
	start, end time.Time
}

func (f *faultEnv) scrapeExporter() (map[string]*dto.MetricFamily, error) {
	return framework.Scrape(f.ctx, f.c, "http://"+f.expAddr+"/metrics")
}

func (f *faultEnv) scrapeRemediator(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	fams, err := framework.Scrape(f.ctx, f.c, "http://"+f.remAddr+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// used returns the published emptydir_used_bytes of pod's volume "empty", if published.
func used(fams map[string]*dto.MetricFamily, pod *corev1.Pod) (int64, bool) {
	v, ok := framework.Sample(fams, "emptydir_used_bytes", map[string]string{"uid": string(pod.UID), "volume": "empty"})
	return int64(v), ok
}

// histogram returns the sample count and sum of a histogram family's first series.
func histogram(fams map[string]*dto.MetricFamily, name string) (uint64, float64) {
	mf := fams[name]
	if mf == nil || len(mf.GetMetric()) == 0 {
		return 0, 0
	}
	h := mf.GetMetric()[0].GetHistogram()
	return h.GetSampleCount(), h.GetSampleSum()
}

// podWithLimit is the seed pod with another sizeLimit.
func podWithLimit(c *cluster.Cluster, ns, name, limit string) *corev1.Pod {
	p := c.SeedPod(ns, name)
	l := resource.MustParse(limit)
	p.Spec.Volumes[0].EmptyDir.SizeLimit = &l
	return p
}

// addFiles fills a volume with directories × bigFilesPerDirectory empty files, written from the
// node: the walk sees the same as if the pod had written them, and this is much faster than
// creating them through exec.
func addFiles(t *testing.T, c *cluster.Cluster, pod *corev1.Pod, directories int) {
	t.Helper()
	dir := part.EmptyDirPath(c.KubeletRootDir(), string(pod.UID), "empty")
	for i := range directories {
		sub := filepath.Join(dir, fmt.Sprintf("d%03d", i))
		if err := os.Mkdir(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		for j := range bigFilesPerDirectory {
			fd, err := unix.Open(filepath.Join(sub, strconv.Itoa(j)), unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			unix.Close(fd)
		}
	}
}

// since formats the seconds from a to b for the table.
func since(a, b time.Time) string { return fmt.Sprintf("%.1f s", b.Sub(a).Seconds()) }

// TestFaults injects real faults into the real cluster — the API server stopped and started
// again, the kubelet restarted, the exporter SIGKILLed in the middle of its walks, and a
// volume whose honest walk takes longer than the remediator once allowed — and checks after
// each that nothing was evicted wrongly and that every component recovered on its own. The
// results go into docs/reliability.md, section "faults".
func TestFaults(t *testing.T) {
	exporterBin, remediatorBin := testbin.Path(t, "emptydir-exporter"), testbin.Path(t, "emptydir-remediator")
	c := sharedCluster(t)
	ctx, cancel := context.WithTimeout(rootCtx, 8*time.Minute)
	defer cancel()
	f := &faultEnv{t: t, c: c, ctx: ctx, ns: "faults-" + framework.RandSuffix(), token: "e2e-faults-webhook-token-0123456789ab", bin: exporterBin,
		expAddr: "127.0.0.1:19781", remAddr: "127.0.0.1:19782"}
	if err := c.EnsureNamespace(ctx, f.ns); err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(f.token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The exporter's defaults (10 s interval, 1 m volume timeout, 2 volumes at once).
	f.args = []string{"--node.name=" + c.NodeName(), "--kubeconfig=" + c.KubeconfigPath(),
		"--kubelet.root-dir=" + c.KubeletRootDir(), "--web.listen-address=" + f.expAddr}
	f.startExporter(t)
	// The remediator's defaults (--measurement.timeout 35s, --measurement.max-age 5s from the
	// walk's end, Lease 15s/10s/2s), with leader election and the ledger ConfigMap as deployed.
	framework.StartInNetns(t, c, "remediator-"+f.ns, remediatorBin, "--kubeconfig="+c.KubeconfigPath(),
		"--exporter.url=http://"+f.expAddr, "--web.bearer-token-file="+tokenFile, "--policy.namespace-allow="+f.ns,
		"--leader-elect.enabled", "--leader-elect.lease-namespace="+f.ns, "--leader-elect.identity=faults-remediator",
		"--web.listen-address="+f.remAddr)
	framework.Eventually(t, 60*time.Second, 200*time.Millisecond, "remediator leads", func() (bool, string) {
		s := readyState(c, f.remAddr)
		return strings.Contains(s, "leader"), s
	})

	// bigUnder is far under its limit and must survive everything; its walk is the slow one.
	bigUnder := framework.RunPod(ctx, t, c, podWithLimit(c, f.ns, "big-under", "4Gi"))
	bigOver := podWithLimit(c, f.ns, "big-over", "1Mi")
	bigOver.Labels = map[string]string{"app": "big-over"}
	bigOver = framework.RunPod(ctx, t, c, bigOver)
	apiOver := framework.RunPod(ctx, t, c, c.SeedPod(f.ns, "api-over"))
	kubeletOver := framework.RunPod(ctx, t, c, c.SeedPod(f.ns, "kubelet-over"))
	killOver := framework.RunPod(ctx, t, c, c.SeedPod(f.ns, "kill-over"))
	doomed := framework.RunPod(ctx, t, c, c.SeedPod(f.ns, "doomed"))
	for _, p := range []*corev1.Pod{bigOver, apiOver, kubeletOver, killOver} {
		framework.Fill(ctx, t, c, p, 2000)
	}
	addFiles(t, c, bigUnder, bigUnderDirectories)
	addFiles(t, c, bigOver, bigOverDirectories)
	wantUnder := framework.DuBytes(t, part.EmptyDirPath(c.KubeletRootDir(), string(bigUnder.UID), "empty"))
	wantOver := framework.DuBytes(t, part.EmptyDirPath(c.KubeletRootDir(), string(bigOver.UID), "empty"))
	framework.Eventually(t, 2*time.Minute, time.Second, "exporter publishes du's numbers of the big volumes", func() (bool, string) {
		fams, err := f.scrapeExporter()
		if err != nil {
			return false, err.Error()
		}
		u, _ := used(fams, bigUnder)
		o, _ := used(fams, bigOver)
		_, d := used(fams, doomed)
		return u == wantUnder && o == wantOver && d, fmt.Sprintf("big-under %d (du %d), big-over %d (du %d), doomed published %v", u, wantUnder, o, wantOver, d)
	})

	t.Run("kube-apiserver stopped and started again", func(t *testing.T) { f.apiServerRestart(t, bigUnder, apiOver, doomed, wantUnder) })
	t.Run("kubelet restarted during live re-checks and walks", func(t *testing.T) { f.kubeletRestart(t, bigUnder, kubeletOver, wantUnder) })
	t.Run("exporter SIGKILLed mid-walk and started again", func(t *testing.T) { f.exporterKill(t, bigUnder, killOver, wantUnder) })
	t.Run("big volume remediated with the default flags", func(t *testing.T) { f.bigVolume(t, bigOver) })

	// The witness: under its limit, measured live again and again through every fault.
	requireNotEvicted(ctx, t, c, bigUnder, nil)
	if t.Failed() {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Last run of `TestFaults` (one exporter held to %dm CPU; big-under %d files, big-over %d files; times measured, not asserted):\n\n",
		exporterMillicores, bigUnderDirectories*bigFilesPerDirectory, bigOverDirectories*bigFilesPerDirectory)
	b.WriteString("| fault | checked | result |\n| --- | --- | --- |\n")
	for _, r := range f.rows {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", r.fault, r.checked, r.result)
	}
	framework.RecordDoc(t, "docs/reliability.md", "faults", "TestFaults", b.String())
}

// apiServerRestart: the exporter serves its last measurements while the API server is down
// and recovers its watch after; the remediator answers 5xx meanwhile and completes the same
// delivery after.
func (f *faultEnv) apiServerRestart(t *testing.T, bigUnder, over, doomed *corev1.Pod, wantUnder int64) {
	c := f.c
	before, err := f.scrapeExporter()
	if err != nil {
		t.Fatal(err)
	}
	watchErrs0, _ := framework.Sample(before, "emptydir_exporter_pod_watch_errors_total", nil)

	c.StopAPIServer()
	stopped := time.Now()
	t.Cleanup(func() {
		// Never leave the shared cluster without its API server.
		if err := c.StartAPIServer(context.Background()); err != nil && !errors.Is(err, cluster.ErrRunning) {
			t.Errorf("restarting the API server after a failure: %v", err)
		}
	})
	// Behind the API server's back: the exporter must find out on its own once it is back.
	if err := c.DeletePodInEtcd(f.ctx, doomed.Namespace, doomed.Name); err != nil {
		t.Fatal(err)
	}
	var refusals []string
	scrapes := 0
	// Long enough for the remediator's Lease renewal (renew deadline 10 s) to fail.
	for time.Since(stopped) < 15*time.Second {
		fams, err := f.scrapeExporter()
		if err != nil {
			t.Fatalf("scrape during the outage: %v", err)
		}
		scrapes++
		if u, ok := used(fams, bigUnder); !ok || u != wantUnder {
			t.Errorf("during the outage big-under used = %d (published %v), want the last measurement %d", u, ok, wantUnder)
		}
		code, res, desc, err := f.deliver(over)
		switch {
		case err != nil:
			t.Fatalf("delivery during the outage: %v", err)
		case code < 500 || (res.Outcome != "" && !res.Outcome.Retryable()):
			t.Fatalf("delivery during the outage: %s %q, want 5xx so Alertmanager retries", desc, res.Message)
		}
		refusals = append(refusals, desc)
		time.Sleep(2 * time.Second)
	}
	standby := readyState(c, f.remAddr)

	if err := c.StartAPIServer(f.ctx); err != nil {
		t.Fatal(err)
	}
	ready := time.Now()
	res, retried := f.deliverUntilDone(t, over, 90*time.Second)
	evicted := time.Now()
	if res.Outcome != remediator.OutcomeEvicted {
		t.Fatalf("after the restart: %s/%s %q, want evicted", res.Outcome, res.Reason, res.Message)
	}
	late := framework.RunPod(f.ctx, t, c, c.SeedPod(f.ns, "late"))
	created := time.Now()
	var lateSeen, doomedGone time.Time
	framework.Eventually(t, 2*time.Minute, 500*time.Millisecond, "exporter measures the pod created after the restart and drops the one deleted during it", func() (bool, string) {
		fams, err := f.scrapeExporter()
		if err != nil {
			return false, err.Error()
		}
		if _, ok := used(fams, late); ok && lateSeen.IsZero() {
			lateSeen = time.Now()
		}
		if _, ok := used(fams, doomed); !ok && doomedGone.IsZero() {
			doomedGone = time.Now()
		}
		return !lateSeen.IsZero() && !doomedGone.IsZero(), fmt.Sprintf("late seen %v, doomed gone %v", !lateSeen.IsZero(), !doomedGone.IsZero())
	})
	after, err := f.scrapeExporter()
	if err != nil {
		t.Fatal(err)
	}
	watchErrs, _ := framework.Sample(after, "emptydir_exporter_pod_watch_errors_total", nil)
	if watchErrs <= watchErrs0 {
		t.Errorf("emptydir_exporter_pod_watch_errors_total %v → %v: the outage is not counted", watchErrs0, watchErrs)
	}
	framework.Eventually(t, time.Minute, 500*time.Millisecond, "evicted pod leaves", func() (bool, string) {
		ok, desc := framework.PodState(f.ctx, c, over.Namespace, over.Name, string(over.UID))
		return !ok, desc
	})
	requireEvent(f.ctx, t, c, over, remediator.EventEvicted)
	requireNotEvicted(f.ctx, t, c, bigUnder, nil)

	t.Logf("outage %s; during it %d scrapes served, deliveries answered %v; remediator then %q; after /readyz: %d more refusals %v, evicted after %s, new pod measured %s after creation, deleted pod's series gone %s after /readyz",
		ready.Sub(stopped).Round(time.Millisecond), scrapes, refusals, standby, len(retried), retried, evicted.Sub(ready), lateSeen.Sub(created), doomedGone.Sub(ready))
	fault := fmt.Sprintf("kube-apiserver stopped for %s, then started again (etcd kept)", since(stopped, ready))
	f.row(fault, "exporter: every scrape during the outage answered, with the last measurements",
		"%d/%d scrapes served; big-under kept du's %d bytes", scrapes, scrapes, wantUnder)
	f.row(fault, "remediator: deliveries during the outage answered 5xx (Alertmanager retries)",
		"%d deliveries: %s", len(refusals), strings.Join(uniq(refusals), ", "))
	f.row(fault, "the same delivery after the restart: right outcome",
		"evicted %s after /readyz (%d more 5xx before: %s); Event `EmptyDirEvicted`", since(ready, evicted), len(retried), strings.Join(uniq(retried), ", "))
	f.row(fault, "exporter's pod watch recovers: a pod created after the restart is measured",
		"published %s after its creation", since(created, lateSeen))
	f.row(fault, "a pod deleted during the outage (in etcd) vanishes from /metrics",
		"gone %s after /readyz; `pod_watch_errors_total` +%v", since(ready, doomedGone), watchErrs-watchErrs0)
}

// kubeletRestart: the kubelet goes away while an over-limit pod is evicted and a slow live
// re-check of an under-limit pod runs, and comes back during that re-check.
func (f *faultEnv) kubeletRestart(t *testing.T, bigUnder, over *corev1.Pod, wantUnder int64) {
	c := f.c
	c.StopKubelet()
	stopped := time.Now()
	t.Cleanup(func() {
		if err := c.StartKubelet(context.Background()); err != nil && !errors.Is(err, cluster.ErrRunning) {
			t.Errorf("restarting the kubelet after a failure: %v", err)
		}
	})
	// Eviction goes through the API server; the pod terminates once a kubelet is back.
	res, retriedOver := f.deliverUntilDone(t, over, time.Minute)
	if res.Outcome != remediator.OutcomeEvicted {
		t.Fatalf("over-limit pod with the kubelet down: %s/%s %q, want evicted", res.Outcome, res.Reason, res.Message)
	}
	pending := f.asyncDeliver(bigUnder)
	time.Sleep(time.Second) // the live walk is under way
	if err := c.StartKubelet(f.ctx); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	d := <-pending
	if d.err != nil {
		t.Fatal(d.err)
	}
	if d.end.Before(back) {
		t.Errorf("the live re-check (%s – %s) ended before the kubelet was back at %s: the fault missed it",
			d.start.Format(time.StampMilli), d.end.Format(time.StampMilli), back.Format(time.StampMilli))
	}
	final := d.res
	var retried []string
	if d.code >= 500 {
		retried = append(retried, d.desc)
		var more []string
		final, more = f.deliverUntilDone(t, bigUnder, time.Minute)
		retried = append(retried, more...)
	}
	if final.Outcome != remediator.OutcomeSkipped || final.Reason != remediator.SkipNotOverLimit {
		t.Fatalf("under-limit pod re-checked across the kubelet restart: %s/%s %q, want skipped/not_over_limit", final.Outcome, final.Reason, final.Message)
	}
	if final.UsedBytes == nil || *final.UsedBytes != wantUnder {
		t.Errorf("live re-check across the kubelet restart used %v bytes, want du's %d", final.UsedBytes, wantUnder)
	}
	framework.Eventually(t, time.Minute, 500*time.Millisecond, "evicted pod leaves once the kubelet is back", func() (bool, string) {
		ok, desc := framework.PodState(f.ctx, c, over.Namespace, over.Name, string(over.UID))
		return desc == "gone", fmt.Sprint(ok, desc)
	})
	gone := time.Now()
	var exporterOK time.Time
	framework.Eventually(t, time.Minute, 500*time.Millisecond, "exporter's walks still match du", func() (bool, string) {
		fams, err := f.scrapeExporter()
		if err != nil {
			return false, err.Error()
		}
		u, _ := used(fams, bigUnder)
		ok, _ := framework.Sample(fams, "emptydir_exporter_collection_success", nil)
		exporterOK = time.Now()
		return u == wantUnder && ok == 1, fmt.Sprintf("big-under %d (du %d), collection_success %v", u, wantUnder, ok)
	})
	requireNotEvicted(f.ctx, t, c, bigUnder, nil)

	fault := fmt.Sprintf("kubelet stopped for %s (containers kept), then started", since(stopped, back))
	f.row(fault, "over-limit pod evicted while the kubelet is down",
		"evicted (%d 5xx before: %s); pod gone %s after the kubelet was back", len(retriedOver), strings.Join(uniq(retriedOver), ", "), since(back, gone))
	f.row(fault, "kubelet back during a live re-check of an under-limit pod's big volume",
		"re-check %s – %s (kubelet back at %s): %s/%s, %d 5xx before; not evicted",
		since(stopped, d.start), since(stopped, d.end), since(stopped, back), final.Outcome, final.Reason, len(retried))
	f.row(fault, "exporter's periodic walks across the restart",
		"du's numbers and `collection_success` 1 %s after the kubelet was back", since(back, exporterOK))
}

// exporterKill: the exporter dies in the middle of a live walk and of its periodic walks; the
// remediator refuses to act meanwhile, and a new exporter publishes only complete values.
func (f *faultEnv) exporterKill(t *testing.T, bigUnder, over *corev1.Pod, wantUnder int64) {
	c := f.c
	// The remediator reuses a live measurement while it is fresh (--measurement.max-age, 5 s
	// from the walk's end): let the last one of big-under expire, so that this delivery walks.
	time.Sleep(6 * time.Second)
	pending := f.asyncDeliver(bigUnder)
	time.Sleep(1500 * time.Millisecond) // the live walk is under way
	f.killExporter(t)
	killed := time.Now()
	d := <-pending
	if d.err != nil {
		t.Fatal(d.err)
	}
	if d.code != http.StatusServiceUnavailable || d.res.Outcome != remediator.OutcomeError ||
		!strings.HasPrefix(d.res.Reason, "measurement_") {
		t.Fatalf("re-check cut by the exporter's death: %d %s/%s %q, want 503 error/measurement_*", d.code, d.res.Outcome, d.res.Reason, d.res.Message)
	}
	code, res, _, err := f.deliver(over)
	if err != nil {
		t.Fatal(err)
	}
	if code != http.StatusServiceUnavailable || res.Outcome != remediator.OutcomeError || !strings.HasPrefix(res.Reason, "measurement_") {
		t.Fatalf("over-limit pod without an exporter: %d %s/%s %q, want 503 error/measurement_* (never evict without a live measurement)", code, res.Outcome, res.Reason, res.Message)
	}
	if ok, desc := framework.PodState(f.ctx, c, over.Namespace, over.Name, string(over.UID)); !ok {
		t.Fatalf("over-limit pod evicted without a live measurement: %s", desc)
	}
	fams := f.scrapeRemediator(t)
	unreachable, _ := framework.Sample(fams, "emptydir_remediator_live_measurement_errors_total", map[string]string{"reason": remediator.MeasureUnreachable})
	if unreachable < 2 {
		t.Errorf("live_measurement_errors_total{reason=unreachable} = %v, want the two refused re-checks counted", unreachable)
	}

	f.startExporter(t)
	restarted := time.Now()
	// Until its first walk of big-under completes, the new exporter must not publish the
	// volume at all: absent, never a partial number. Watched while the alert is retried.
	type republish struct {
		absent int
		at     time.Time
		err    error
	}
	watched := make(chan republish, 1)
	go func() {
		var r republish
		var scrapeErr error
		err := wait.PollUntilContextTimeout(f.ctx, 300*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
			fams, err := f.scrapeExporter()
			scrapeErr = err // the port is open before the handler serves: retry
			if err == nil {
				switch u, ok := used(fams, bigUnder); {
				case !ok:
					r.absent++
				case u != wantUnder:
					return false, fmt.Errorf("new exporter published big-under = %d, not du's %d: a partial value", u, wantUnder)
				default:
					r.at = time.Now()
					return true, nil
				}
			}
			return false, nil
		})
		if wait.Interrupted(err) {
			// The last scrape's error too, if it failed: the exporter may never have served.
			err = fmt.Errorf("new exporter did not publish big-under within 2m (absent in %d scrapes): %w", r.absent, errors.Join(err, scrapeErr))
		}
		r.err = err
		watched <- r
	}()
	final, retried := f.deliverUntilDone(t, over, time.Minute)
	evicted := time.Now()
	if final.Outcome != remediator.OutcomeEvicted {
		t.Fatalf("after the exporter's restart: %s/%s %q, want evicted", final.Outcome, final.Reason, final.Message)
	}
	rp := <-watched
	if rp.err != nil {
		t.Fatal(rp.err)
	}
	absent, republished := rp.absent, rp.at
	requireNotEvicted(f.ctx, t, c, bigUnder, nil)

	fault := "exporter SIGKILLed during a live walk and its periodic walks, started again"
	f.row(fault, "the cut live re-check of an under-limit pod", "%d %s/%s; not evicted", d.code, d.res.Outcome, d.res.Reason)
	f.row(fault, "an over-limit pod while no exporter runs", "%d %s/%s, `live_measurement_errors_total{reason=\"unreachable\"}` counted; not evicted", code, res.Outcome, res.Reason)
	f.row(fault, "the same over-limit delivery, retried from the restart on",
		"evicted %s after the start (%d 5xx before: %s); %s after the kill", since(restarted, evicted), len(retried), strings.Join(uniq(retried), ", "), since(killed, evicted))
	f.row(fault, "new exporter publishes only complete values",
		"big-under absent in %d scrapes during its first walk, then du's %d bytes %s after the start; no other value seen", absent, wantUnder, since(restarted, republished))
}

// bigVolume: a volume whose live walk takes longer than the 5 s the remediator once allowed
// is remediated with the default flags, and Alertmanager's quick retry of a refused eviction
// reuses the measurement instead of walking again.
func (f *faultEnv) bigVolume(t *testing.T, big *corev1.Pod) {
	c := f.c
	one := intstr.FromInt32(1)
	pdb, err := c.Client().PolicyV1().PodDisruptionBudgets(f.ns).Create(f.ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "big-over"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &one,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "big-over"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	exp0, err := f.scrapeExporter()
	if err != nil {
		t.Fatal(err)
	}
	live0, _ := framework.Sample(exp0, "emptydir_exporter_live_requests_total", map[string]string{"code": "200"})
	rem0 := f.scrapeRemediator(t)
	reused0, _ := framework.Sample(rem0, "emptydir_remediator_live_measurements_reused_total", nil)
	n0, sum0 := histogram(rem0, "emptydir_remediator_live_measurement_duration_seconds")

	code, res, _, err := f.deliver(big)
	if err != nil {
		t.Fatal(err)
	}
	if code != http.StatusServiceUnavailable || res.Outcome != remediator.OutcomePDBBlocked {
		t.Fatalf("big over-limit volume behind a PDB: %d %s/%s %q, want 503 pdb_blocked (measured, over, then refused by the budget)", code, res.Outcome, res.Reason, res.Message)
	}
	rem1 := f.scrapeRemediator(t)
	n1, sum1 := histogram(rem1, "emptydir_remediator_live_measurement_duration_seconds")
	walk := time.Duration((sum1 - sum0) / float64(n1-n0) * float64(time.Second))
	// Alertmanager's first retry comes about 0.5 s later.
	code, res, _, err = f.deliver(big)
	if err != nil {
		t.Fatal(err)
	}
	if code != http.StatusServiceUnavailable || res.Outcome != remediator.OutcomePDBBlocked {
		t.Fatalf("retry: %d %s/%s, want 503 pdb_blocked", code, res.Outcome, res.Reason)
	}
	rem2 := f.scrapeRemediator(t)
	reused, _ := framework.Sample(rem2, "emptydir_remediator_live_measurements_reused_total", nil)
	exp2, err := f.scrapeExporter()
	if err != nil {
		t.Fatal(err)
	}
	live2, _ := framework.Sample(exp2, "emptydir_exporter_live_requests_total", map[string]string{"code": "200"})
	if reused != reused0+1 || live2 != live0+1 {
		t.Errorf("retry: live_measurements_reused_total %v → %v, exporter live requests answered 200 %v → %v; want the retry to reuse the one walk",
			reused0, reused, live0, live2)
	}

	if err := c.Client().PolicyV1().PodDisruptionBudgets(f.ns).Delete(f.ctx, pdb.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	final, retried := f.deliverUntilDone(t, big, time.Minute)
	if final.Outcome != remediator.OutcomeEvicted {
		t.Fatalf("big over-limit volume without the PDB: %s/%s %q, want evicted", final.Outcome, final.Reason, final.Message)
	}
	framework.Eventually(t, time.Minute, 500*time.Millisecond, "evicted pod leaves", func() (bool, string) {
		ok, desc := framework.PodState(f.ctx, c, big.Namespace, big.Name, string(big.UID))
		return !ok, desc
	})
	requireEvent(f.ctx, t, c, big, remediator.EventEvicted)
	t.Logf("big volume: live walk %s; retry reused it (%v → %v); evicted after %d more refusals %v", walk.Round(time.Millisecond), reused0, reused, len(retried), retried)

	fault := fmt.Sprintf("big volume (%d files, over its 1Mi limit), default remediator flags", bigOverDirectories*bigFilesPerDirectory)
	f.row(fault, "live re-check of a walk longer than the old 5 s bound", "walk %.1f s: accepted as fresh (max age counts from the walk's end); 503 pdb_blocked behind a PDB", walk.Seconds())
	f.row(fault, "Alertmanager's quick retry", "`live_measurements_reused_total` +%v, exporter walked once (`live_requests_total{code=\"200\"}` +%v)", reused-reused0, live2-live0)
	f.row(fault, "PDB removed, delivered again", "%s (%d 5xx before); Event `EmptyDirEvicted`", final.Outcome, len(retried))
}

// uniq returns the distinct strings of ss in order of first appearance, with counts.
func uniq(ss []string) []string {
	counts := map[string]int{}
	var order []string
	for _, s := range ss {
		if counts[s] == 0 {
			order = append(order, s)
		}
		counts[s]++
	}
	out := make([]string, 0, len(order))
	for _, s := range order {
		out = append(out, fmt.Sprintf("%d× %s", counts[s], s))
	}
	if len(out) == 0 {
		return []string{"none"}
	}
	return out
}
