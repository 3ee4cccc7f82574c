package e2e

import (
	"context"
	"fmt"
	"log"
	"math"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/emptydir-guard/emptydir-guard/exporter"
	"github.com/emptydir-guard/emptydir-guard/internal/testbin"
	"github.com/emptydir-guard/emptydir-guard/remediator"
	"github.com/emptydir-guard/emptydir-guard/test/cluster"
	"github.com/emptydir-guard/emptydir-guard/test/monitoring"
)

const (
	seedLimit        = 1 << 20 // the seed pod's sizeLimit: 1Mi
	kubeletEvictMsg  = `Usage of EmptyDir volume "empty" exceeds the limit "1Mi".`
	evictionDeadline = 4 * time.Minute
)

// timing is one row of the printed table: offsets from the end of the dd that crossed the
// limit. Zero durations mean "not observed" (printed as "-").
type timing struct {
	cluster, pod, enforcer                           string
	metric, alert, amSeen, webhook, recheck, evicted time.Duration
	event                                            time.Duration
	ageAtScrape, ageMax                              float64
	note                                             string
}

// seedWrite is the seed scenario's write: dd of 10 MB into the 1Mi volume.
type seedWrite struct {
	pod     *corev1.Pod
	t0      time.Time // end of the dd exec: the write has crossed the limit
	du      int64     // du -s -B1 of the volume right after the write
	tracker *podTracker
}

func writeSeed(ctx context.Context, c *cluster.Cluster, pod *corev1.Pod, tr *podTracker, kib int) (seedWrite, error) {
	// conv=fsync: the blocks are allocated when dd ends, so du now counts what every later
	// walk counts (delayed allocation may add a block of extent metadata at writeback).
	if _, stderr, err := c.ExecInPod(ctx, pod.Namespace, pod.Name, "test2", "dd", "if=/dev/zero", "of=/test/test.file", "bs=1K", fmt.Sprint("count=", kib), "conv=fsync"); err != nil {
		return seedWrite{}, fmt.Errorf("dd in %s/%s: %v (%s)", pod.Namespace, pod.Name, err, stderr)
	}
	w := seedWrite{pod: pod, t0: time.Now(), tracker: tr}
	out, err := duOf(exporter.Dir(c.KubeletRootDir(), string(pod.UID), "empty"))
	w.du = out
	return w, err
}

// TestSeedScenario is the acceptance story of DESIGN.md on real parts, twice: on the shared
// cluster (localStorageCapacityIsolation=false: only emptyDir guard enforces) and on a second
// cluster with isolation on and the kubelet's default volumeStatsAggPeriod (both enforce).
// It asserts the functional outcomes and prints the timings as a table (not asserted).
func TestSeedScenario(t *testing.T) {
	requireCluster(t)
	var rows []timing
	t.Run("isolation=false", func(t *testing.T) { rows = append(rows, scenarioOnlyWeEnforce(t)...) })
	t.Run("isolation=true", func(t *testing.T) { rows = append(rows, scenarioBothEnforce(t)...) })
	printTable(t, rows)
}

func scenarioOnlyWeEnforce(t *testing.T) []timing {
	c := sharedCluster(t)
	ctx, cancel := context.WithTimeout(rootCtx, 12*time.Minute)
	defer cancel()
	ns := "scn-" + randSuffix()
	if err := c.EnsureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	s := startStack(ctx, t, c, stackOptions{
		remediatorArgs:        []string{"--policy.pod-selector=" + dryRunOnlyLabel + "!=true"},
		dryRun:                true,
		brokenKubeletExporter: true,
	})
	am := watchAlertmanager(ctx, s.mon)
	defer am.Stop()

	// The pods: the seed, and one per negative case.
	seed := runPod(ctx, t, c, c.SeedPod(ns, "empty-test1"))
	under := runPod(ctx, t, c, c.SeedPod(ns, "under-limit"))
	one := intstr.FromInt32(1)
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "pdb-guarded", Namespace: ns},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &one,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "pdb-guarded"}}}}
	if _, err := c.Client().PolicyV1().PodDisruptionBudgets(ns).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	guarded := runPod(ctx, t, c, c.SeedPod(ns, "pdb-guarded"))
	dryPod := c.SeedPod(ns, "dry-run-only")
	dryPod.Labels[dryRunOnlyLabel] = "true"
	dry := runPod(ctx, t, c, dryPod)
	recreated := runPod(ctx, t, c, c.SeedPod(ns, "recreated"))
	trackers := map[string]*podTracker{}
	for _, p := range []*corev1.Pod{seed, under, guarded, dry} {
		trackers[p.Name] = trackPod(ctx, c, p)
		defer trackers[p.Name].Stop()
	}

	// The seed write, then the others.
	w, err := writeSeed(ctx, c, seed, trackers[seed.Name], 10000)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range []struct {
		p   *corev1.Pod
		kib int
	}{{under, 512}, {guarded, 10000}, {dry, 10000}} {
		if _, err := writeSeed(ctx, c, x.p, trackers[x.p.Name], x.kib); err != nil {
			t.Fatal(err)
		}
	}

	// (1)–(3): metric, alert, webhook with auth, live re-check, eviction, Event, counters.
	row := s.oursTimeline(ctx, t, w, am, true)
	row.cluster = "isolation=false"
	eventually(t, time.Minute, 500*time.Millisecond, "evicted seed pod gone or Failed", func() (bool, string) {
		_, failed, gone, _, _ := w.tracker.snapshot()
		return !gone.IsZero() || !failed.IsZero(), "still there"
	})

	// A webhook without the token (or with a wrong one) is rejected and changes nothing.
	for _, tok := range []string{"", "not-" + s.token} {
		code, _, raw, err := postWebhook(ctx, c, scnRemediatorAddr, tok, overLimitPayload(c.NodeName(), ns, guarded.Name, string(guarded.UID), "empty"))
		if err != nil || code != http.StatusUnauthorized {
			t.Errorf("webhook with token %q: %d %s %v, want 401", tok, code, raw, err)
		}
	}

	// PDB: the API answers 429 (no controller-manager computes disruptionsAllowed), the
	// remediator counts pdb_blocked, records an Event, and the pod stays.
	eventually(t, 2*time.Minute, time.Second, "PDB-covered pod counted pdb_blocked", func() (bool, string) {
		fams, err := scrape(ctx, c, "http://"+scnRemediatorAddr+"/metrics")
		if err != nil {
			return false, err.Error()
		}
		n, _ := sample(fams, "emptydir_remediator_evictions_total", map[string]string{"result": "pdb_blocked"})
		return n >= 1, fmt.Sprintf("pdb_blocked=%v", n)
	})
	requireEvent(ctx, t, c, guarded, remediator.EventEvictionBlocked)

	// Dry run: a second remediator with --eviction.dry-run, asked directly about an over-limit pod the
	// main one leaves alone (pod selector): it re-checks, says it would evict, evicts nothing.
	code, resp, raw, err := postWebhook(ctx, c, scnDryRunAddr, s.token, overLimitPayload(c.NodeName(), ns, dry.Name, string(dry.UID), "empty"))
	if err != nil || code != http.StatusOK || len(resp.Alerts) != 1 || resp.Alerts[0].Outcome != remediator.OutcomeDryRun {
		t.Errorf("dry-run remediator: %d %s %v, want 200 with outcome dry_run", code, raw, err)
	}
	fams, err := scrape(ctx, c, "http://"+scnDryRunAddr+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := sample(fams, "emptydir_remediator_evictions_total", map[string]string{"result": "dry_run"}); n != 1 {
		t.Errorf("dry-run remediator evictions_total{result=dry_run} = %v, want 1", n)
	}
	if n, _ := sample(fams, "emptydir_remediator_evictions_total", map[string]string{"result": "evicted"}); n != 0 {
		t.Errorf("dry-run remediator evictions_total{result=evicted} = %v, want 0", n)
	}
	requireEvent(ctx, t, c, dry, remediator.EventOverLimit)
	eventually(t, time.Minute, time.Second, "main remediator skipped the dry-run-only pod (selector)", func() (bool, string) {
		fams, err := scrape(ctx, c, "http://"+scnRemediatorAddr+"/metrics")
		if err != nil {
			return false, err.Error()
		}
		n, _ := sample(fams, "emptydir_remediator_skips_total", map[string]string{"reason": "selector"})
		return n >= 1, fmt.Sprintf("skips{selector}=%v", n)
	})

	// A stale alert for a recreated pod (same name, new UID) evicts nothing.
	oldUID := string(recreated.UID)
	zero := int64(0)
	if err := c.Client().CoreV1().Pods(ns).Delete(ctx, recreated.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, 250*time.Millisecond, "old pod gone", func() (bool, string) {
		_, err := c.Client().CoreV1().Pods(ns).Get(ctx, recreated.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	recreated = runPod(ctx, t, c, c.SeedPod(ns, "recreated"))
	trackers["recreated"] = trackPod(ctx, c, recreated)
	defer trackers["recreated"].Stop()
	code, resp, raw, err = postWebhook(ctx, c, scnRemediatorAddr, s.token, overLimitPayload(c.NodeName(), ns, recreated.Name, oldUID, "empty"))
	if err != nil || code != http.StatusOK || len(resp.Alerts) != 1 || resp.Alerts[0].Outcome != remediator.OutcomeSkipped || resp.Alerts[0].Reason != "recreated" {
		t.Errorf("stale alert for the recreated pod: %d %s %v, want 200 skipped/recreated", code, raw, err)
	}

	// Every dashboard query returns data.
	checkDashboards(ctx, t, s.mon, map[string]string{"namespace": ns, "pod": guarded.Name})

	// The pods that must not have been evicted are still running, same instance.
	for _, p := range []*corev1.Pod{under, guarded, dry, recreated} {
		requireNotEvicted(ctx, t, c, p, trackers[p.Name])
	}
	fams, err = scrape(ctx, c, "http://"+scnRemediatorAddr+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := sample(fams, "emptydir_remediator_evictions_total", map[string]string{"result": "evicted"}); n != 1 {
		t.Errorf("main remediator evictions_total{result=evicted} = %v, want exactly 1 (the seed pod)", n)
	}
	return []timing{row}
}

func scenarioBothEnforce(t *testing.T) []timing {
	requireCluster(t)
	testbin.Path(t, "emptydir-exporter")
	ctx, cancel := context.WithTimeout(rootCtx, 15*time.Minute)
	defer cancel()
	c := startIsolatedCluster(ctx, t)
	nsRace, nsKubelet := "race-"+randSuffix(), "kubelet-only-"+randSuffix()
	for _, ns := range []string{nsRace, nsKubelet} {
		if err := c.EnsureNamespace(ctx, ns); err != nil {
			t.Fatal(err)
		}
	}
	// The remediator never touches nsKubelet, so that pod measures the kubelet on its own.
	s := startStack(ctx, t, c, stackOptions{remediatorArgs: []string{"--policy.namespace-deny=" + nsKubelet}})
	am := watchAlertmanager(ctx, s.mon)
	defer am.Stop()

	seed := runPod(ctx, t, c, c.SeedPod(nsRace, "empty-test1"))
	kub := runPod(ctx, t, c, c.SeedPod(nsKubelet, "empty-test1"))
	under := runPod(ctx, t, c, c.SeedPod(nsRace, "under-limit"))
	trSeed, trKub, trUnder := trackPod(ctx, c, seed), trackPod(ctx, c, kub), trackPod(ctx, c, under)
	defer trSeed.Stop()
	defer trKub.Stop()
	defer trUnder.Stop()

	// Both writes at once, so both enforcers face the same node state.
	var wg sync.WaitGroup
	var ws [2]seedWrite
	var errs [2]error
	for i, x := range []struct {
		p  *corev1.Pod
		tr *podTracker
	}{{seed, trSeed}, {kub, trKub}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ws[i], errs[i] = writeSeed(ctx, c, x.p, x.tr, 10000)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := writeSeed(ctx, c, under, trUnder, 512); err != nil {
		t.Fatal(err)
	}

	// Who evicts the seed pod first? Ours is an Eviction API call (deletionTimestamp, our
	// Event); the kubelet's is a local kill: phase Failed, reason Evicted, its own message.
	ours := s.oursTimeline(ctx, t, ws[0], am, false)
	ours.cluster = "isolation=true"
	term, failed, gone, reason, msg := trSeed.snapshot()
	if term.IsZero() {
		term = gone // grace period 0: deleted at once
	}
	switch {
	case !term.IsZero() && (failed.IsZero() || term.Before(failed)):
		ours.note = "evicted first by emptyDir guard (Eviction API)"
	case !failed.IsZero() && reason == "Evicted" && strings.Contains(msg, kubeletEvictMsg):
		ours.enforcer = "kubelet (won the race)"
		ours.note = "evicted first by the kubelet: " + msg
	default:
		t.Errorf("seed pod: terminating=%v failed=%v reason=%q message=%q: evicted by nobody known", term, failed, reason, msg)
	}

	// The kubelet on its own, at its defaults.
	eventually(t, evictionDeadline, time.Second, "kubelet evicts the pod in the denied namespace", func() (bool, string) {
		_, failed, gone, reason, msg := trKub.snapshot()
		return !failed.IsZero() || !gone.IsZero(), fmt.Sprintf("reason=%q message=%q", reason, msg)
	})
	term, failed, gone, reason, msg = trKub.snapshot()
	if !term.IsZero() || !gone.IsZero() || reason != "Evicted" || !strings.Contains(msg, kubeletEvictMsg) {
		t.Errorf("kubelet-only pod: terminating=%v gone=%v reason=%q message=%q, want the kubelet's own eviction (Failed/Evicted, %q) and no API eviction",
			term, gone, reason, msg, kubeletEvictMsg)
	}
	if evs := podEvents(ctx, t, c, kub, remediator.EventEvicted); len(evs) != 0 {
		t.Errorf("remediator evicted a pod of a denied namespace: %v", evs)
	}
	kubRow := timing{cluster: "isolation=true", pod: nsKubelet + "/" + kub.Name, enforcer: "kubelet alone (namespace denied to us)",
		evicted: failed.Sub(ws[1].t0), note: "status: " + reason + ": " + msg}
	if ft, ok := firstSample(ctx, s.mon, fmt.Sprintf(`emptydir_used_bytes{uid=%q}[20m]`, kub.UID), seedLimit); ok {
		kubRow.metric = ft.Sub(ws[1].t0)
	}
	if ft, ok := firstSample(ctx, s.mon, fmt.Sprintf(`ALERTS{alertname="EmptyDirOverLimit",alertstate="firing",uid=%q}[20m]`, kub.UID), 0); ok {
		kubRow.alert = ft.Sub(ws[1].t0)
	}
	if x := am.at(string(kub.UID)); !x.IsZero() {
		kubRow.amSeen = x.Sub(ws[1].t0)
	}
	if hs := s.recorder.forUID(string(kub.UID)); len(hs) > 0 {
		kubRow.webhook = hs[0].Received.Sub(ws[1].t0)
		if r, ok := outcomeFor(hs[0], string(kub.UID)); ok {
			kubRow.note += fmt.Sprintf("; our remediator answered %s/%s", r.Outcome, r.Reason)
			if r.Outcome != remediator.OutcomeSkipped || r.Reason != "namespace" {
				t.Errorf("remediator's answer for the pod of the denied namespace: %+v, want skipped/namespace", r)
			}
		}
	}
	requireNotEvicted(ctx, t, c, under, trUnder)
	return []timing{ours, kubRow}
}

// startIsolatedCluster starts a cluster of its own whose kubelet enforces sizeLimit at its
// defaults (localStorageCapacityIsolation on, volumeStatsAggPeriod 1m with jitter), and stops
// it when the test ends or ctx does.
func startIsolatedCluster(ctx context.Context, t testing.TB) *cluster.Cluster {
	t.Helper()
	logger := log.New(os.Stderr, "", log.Ltime|log.Lmicroseconds)
	c, err := cluster.Start(ctx, cluster.Options{
		LocalStorageCapacityIsolation: true,
		VolumeStatsAggPeriod:          0, // the kubelet's default (1m, with jitter)
		Logf:                          logger.Printf,
	})
	if err != nil {
		t.Fatalf("cluster with isolation on: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("stop the cluster with isolation on: %v", err)
		}
	})
	// TestMain stops only the shared cluster on SIGINT/SIGTERM; stop this one too (Stop is
	// idempotent and safe concurrently; what an exit cuts short, CleanupStale finishes).
	go func() {
		<-ctx.Done()
		if rootCtx.Err() != nil {
			_ = c.Stop()
		}
	}()
	return c
}

// oursTimeline waits until the seed pod is evicted and reconstructs the chain from the
// evidence each component leaves: Prometheus' raw samples (scrape time), the ALERTS series
// (evaluation time), Alertmanager's API, the recorded webhook, the exporter's log line of the
// live measurement, the pod's deletion and the remediator's Event. With strict, it asserts
// that emptyDir guard did each step (on the isolation=true cluster the kubelet may win).
func (s *stack) oursTimeline(ctx context.Context, t testing.TB, w seedWrite, am *firstSeen, strict bool) timing {
	t.Helper()
	c, uid := s.c, string(w.pod.UID)
	row := timing{pod: w.pod.Namespace + "/" + w.pod.Name, enforcer: "emptyDir guard"}
	if w.du <= seedLimit {
		t.Fatalf("du says %d bytes after writing 10 MB", w.du)
	}
	eventually(t, evictionDeadline, 250*time.Millisecond, "seed pod evicted", func() (bool, string) {
		return !w.tracker.evicted().IsZero(), "not yet"
	})
	row.evicted = w.tracker.evicted().Sub(w.t0)

	// (1) used bytes in Prometheus = du; limit = 1Mi; the measurement's age at scrape.
	used, err := s.mon.Query(ctx, fmt.Sprintf(`emptydir_used_bytes{uid=%q,volume="empty"}[20m]`, uid))
	if err != nil {
		t.Fatal(err)
	}
	ages, err := s.mon.Query(ctx, fmt.Sprintf(`emptydir_measurement_age_seconds{uid=%q,volume="empty"}[20m]`, uid))
	if err != nil {
		t.Fatal(err)
	}
	ageAt := map[time.Time]float64{}
	for _, smp := range ages {
		for _, p := range smp.Values {
			ageAt[p.Time] = p.Value
			row.ageMax = math.Max(row.ageMax, p.Value)
		}
	}
	first, ok := firstOver(used, seedLimit)
	if !ok {
		t.Errorf("Prometheus never had emptydir_used_bytes over the limit for %s (%v)", uid, used)
	} else {
		row.metric = first.Time.Sub(w.t0)
		row.ageAtScrape = ageAt[first.Time]
	}
	// Every over-limit value is du's, or part of the write from a walk that began while dd
	// was still writing (the eviction may follow such a value before a full one is published).
	for _, smp := range used {
		for _, p := range smp.Values {
			walkStart := p.Time.Add(-secs(ageAt[p.Time]))
			if p.Value > seedLimit && int64(p.Value) != w.du && (int64(p.Value) > w.du || !walkStart.Before(w.t0)) {
				t.Errorf("emptydir_used_bytes in Prometheus = %v at %v (walk began %v, dd ended %v), du -s -B1 = %d",
					p.Value, p.Time, walkStart, w.t0, w.du)
			}
		}
	}
	lim, err := s.mon.Query(ctx, fmt.Sprintf(`emptydir_limit_bytes{uid=%q,volume="empty"}[20m]`, uid))
	if err != nil || len(lim) != 1 || lim[0].Value != seedLimit {
		t.Errorf("emptydir_limit_bytes = %v (%v), want %d", lim, err, seedLimit)
	}

	// (2) the alert fires; Alertmanager has it and posts it to the remediator with the token.
	if ft, ok := firstSample(ctx, s.mon, fmt.Sprintf(`ALERTS{alertname="EmptyDirOverLimit",alertstate="firing",uid=%q}[20m]`, uid), 0); ok {
		row.alert = ft.Sub(w.t0)
	} else if strict {
		t.Errorf("EmptyDirOverLimit never fired for %s", uid)
	}
	if at := am.at(uid); !at.IsZero() {
		row.amSeen = at.Sub(w.t0)
	} else if strict {
		t.Errorf("Alertmanager never held EmptyDirOverLimit for %s", uid)
	}
	hooks := s.recorder.forUID(uid)
	if len(hooks) == 0 {
		if strict {
			t.Errorf("Alertmanager never posted EmptyDirOverLimit for %s to the remediator", uid)
		}
	} else {
		h := hooks[0]
		row.webhook = h.Received.Sub(w.t0)
		if h.Authorization != "Bearer "+s.token {
			t.Errorf("Alertmanager's webhook carried Authorization %q, want the bearer token", h.Authorization)
		}
		res, found := outcomeFor(h, uid)
		if strict && (h.Code != http.StatusOK || !found || res.Outcome != remediator.OutcomeEvicted || res.Source == "" ||
			res.UsedBytes == nil || *res.UsedBytes <= seedLimit) {
			t.Errorf("remediator answered Alertmanager %d %+v, want 200 with outcome evicted after a live re-check over the limit", h.Code, h.Response)
		}
	}

	// (3) the live re-check at the exporter, the eviction through the API, the Event, the counter.
	if at, ok := logLineTime(c.LogPath(s.exporterLg), `msg="live measurement"`, "uid="+uid); ok {
		row.recheck = at.Sub(w.t0)
	} else if strict {
		t.Errorf("the exporter never served a live measurement of %s", uid)
	}
	// The Eviction API deletes the pod (gracefully: terminating, or at once with the seed
	// pod's grace period 0); the kubelet's own eviction leaves it Failed instead. That the
	// remediator goes through the Eviction API and not a plain delete shows in the PDB case.
	term, failed, gone, _, _ := w.tracker.snapshot()
	if strict && ((term.IsZero() && gone.IsZero()) || (!failed.IsZero() && (term.IsZero() || failed.Before(term)))) {
		t.Errorf("the seed pod was not deleted through the API (terminating %v, gone %v, failed %v)", term, gone, failed)
	}
	if evs := podEvents(ctx, t, c, w.pod, remediator.EventEvicted); len(evs) > 0 {
		e := evs[0]
		if !strings.Contains(e.Message, `"empty"`) {
			t.Errorf("Event %s message %q does not name the volume", e.Reason, e.Message)
		}
		if et := eventTime(e); !et.IsZero() {
			row.event = et.Sub(w.t0)
		}
		row.note = "Event " + e.Reason + ": " + e.Message
	} else if strict {
		t.Errorf("no %s Event on the seed pod", remediator.EventEvicted)
	}
	if strict {
		eventually(t, 30*time.Second, time.Second, "remediator counts the eviction", func() (bool, string) {
			fams, err := scrape(ctx, c, "http://"+scnRemediatorAddr+"/metrics")
			if err != nil {
				return false, err.Error()
			}
			n, _ := sample(fams, "emptydir_remediator_evictions_total", map[string]string{"result": "evicted"})
			a, _ := sample(fams, "emptydir_remediator_alerts_total", map[string]string{"outcome": "evicted"})
			return n >= 1 && a >= 1, fmt.Sprintf("evictions{evicted}=%v alerts{evicted}=%v", n, a)
		})
	}
	return row
}

// secs converts seconds, as Prometheus gives them, to a duration.
func secs(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }

// firstSample returns the time of the first raw sample above v of a range-selector query.
func firstSample(ctx context.Context, mon *monitoring.Stack, expr string, v float64) (time.Time, bool) {
	res, err := mon.Query(ctx, expr)
	if err != nil {
		return time.Time{}, false
	}
	p, ok := firstOver(res, v)
	return p.Time, ok
}

func podEvents(ctx context.Context, t testing.TB, c *cluster.Cluster, p *corev1.Pod, reason string) []corev1.Event {
	t.Helper()
	list, err := c.Client().CoreV1().Events(p.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Event
	for _, e := range list.Items {
		if string(e.InvolvedObject.UID) == string(p.UID) && e.Reason == reason {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return eventTime(out[i]).Before(eventTime(out[j])) })
	return out
}

func eventTime(e corev1.Event) time.Time {
	if !e.EventTime.IsZero() {
		return e.EventTime.Time
	}
	return e.FirstTimestamp.Time
}

func requireEvent(ctx context.Context, t *testing.T, c *cluster.Cluster, p *corev1.Pod, reason string) {
	t.Helper()
	eventually(t, time.Minute, time.Second, fmt.Sprintf("%s Event on %s naming the volume", reason, p.Name), func() (bool, string) {
		evs := podEvents(ctx, t, c, p, reason)
		for _, e := range evs {
			if strings.Contains(e.Message, `"empty"`) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events", len(evs))
	})
}

func requireNotEvicted(ctx context.Context, t *testing.T, c *cluster.Cluster, p *corev1.Pod, tr *podTracker) {
	t.Helper()
	got, err := c.Client().CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
	if err != nil {
		t.Errorf("pod %s/%s that must not be evicted: %v", p.Namespace, p.Name, err)
		return
	}
	if got.UID != p.UID || got.DeletionTimestamp != nil || got.Status.Phase != corev1.PodRunning {
		t.Errorf("pod %s/%s that must not be evicted: uid %s (was %s), deletionTimestamp %v, phase %s",
			p.Namespace, p.Name, got.UID, p.UID, got.DeletionTimestamp, got.Status.Phase)
	}
	if tr != nil && !tr.evicted().IsZero() {
		t.Errorf("pod %s/%s was seen terminating or failed at %s", p.Namespace, p.Name, tr.evicted())
	}
	if evs := podEvents(ctx, t, c, p, remediator.EventEvicted); len(evs) != 0 {
		t.Errorf("pod %s/%s has %s Events: %v", p.Namespace, p.Name, remediator.EventEvicted, evs[0].Message)
	}
}

// checkDashboards runs every dashboard query against the live Prometheus; each must return
// at least one series. Rates need two samples of a counter, so each query gets some time.
func checkDashboards(ctx context.Context, t *testing.T, mon *monitoring.Stack, vars map[string]string) {
	t.Helper()
	qs := dashboardExprs(t)
	deadline := time.Now().Add(90 * time.Second)
	var noData, nanOnly []string
	for _, q := range qs {
		expr := substituteGrafana(q.expr, vars)
		for {
			res, err := mon.Query(ctx, expr)
			if err != nil {
				t.Errorf("%s / %s: %v", q.dashboard, q.panel, err)
				break
			}
			if len(res) > 0 {
				nan := true
				for _, r := range res {
					nan = nan && math.IsNaN(r.Value)
				}
				if nan {
					nanOnly = append(nanOnly, fmt.Sprintf("%s / %s", q.dashboard, q.panel))
				}
				break
			}
			if time.Now().After(deadline) {
				noData = append(noData, fmt.Sprintf("%s / %s: %s", q.dashboard, q.panel, expr))
				break
			}
			time.Sleep(time.Second)
		}
	}
	if len(noData) > 0 {
		t.Errorf("%d of %d dashboard queries return no data:\n  %s", len(noData), len(qs), strings.Join(noData, "\n  "))
	} else {
		t.Logf("all %d dashboard queries return data", len(qs))
	}
	if len(nanOnly) > 0 {
		// Not an error: e.g. a latency quantile over a window without requests.
		t.Logf("%d dashboard queries return only NaN now: %s", len(nanOnly), strings.Join(nanOnly, "; "))
	}
}

func printTable(t *testing.T, rows []timing) {
	d := func(x time.Duration) string {
		if x == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1fs", x.Seconds())
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nSeed scenario timings (seconds after the end of the 10 MB dd into the 1Mi emptyDir; Prometheus scrape/eval 5s, Alertmanager group_wait 1s, exporter interval %s):\n", exporterInterval)
	fmt.Fprintf(&b, "| cluster | pod | evicted by | metric scraped | alert firing | in Alertmanager | webhook received | live re-check | evicted | Event | measurement age at scrape (first / max) |\n")
	fmt.Fprintf(&b, "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	var ours, kubelet time.Duration
	for _, r := range rows {
		age := "-"
		if r.ageMax > 0 || r.ageAtScrape > 0 {
			age = fmt.Sprintf("%.1fs / %.1fs", r.ageAtScrape, r.ageMax)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.cluster, r.pod, r.enforcer,
			d(r.metric), d(r.alert), d(r.amSeen), d(r.webhook), d(r.recheck), d(r.evicted), d(r.event), age)
		if r.cluster == "isolation=true" && r.enforcer == "emptyDir guard" {
			ours = r.evicted
		}
		if strings.HasPrefix(r.enforcer, "kubelet alone") {
			kubelet = r.evicted
		}
	}
	for _, r := range rows {
		if r.note != "" {
			fmt.Fprintf(&b, "- %s %s: %s\n", r.cluster, r.pod, r.note)
		}
	}
	if ours > 0 && kubelet > 0 {
		fmt.Fprintf(&b, "ratio ours/kubelet (same cluster, same run): %.1fs / %.1fs = %.2f (target <= 0.25)\n", ours.Seconds(), kubelet.Seconds(), ours.Seconds()/kubelet.Seconds())
	}
	t.Log(b.String())
	fmt.Println(b.String())
}

// TestDemo is `make demo` (hack/demo.sh): the seed scenario on the shared cluster, printed as
// a timeline while it happens. It runs only with EMPTYDIR_GUARD_DEMO=1; with KEEP=1 it then
// keeps everything running until Ctrl-C and prints how to reach it.
func TestDemo(t *testing.T) {
	if os.Getenv("EMPTYDIR_GUARD_DEMO") != "1" {
		t.Skip("the demo runs only with EMPTYDIR_GUARD_DEMO=1 (make demo)")
	}
	c := sharedCluster(t)
	ctx, cancel := context.WithCancel(rootCtx)
	defer cancel()
	say := func(format string, args ...any) { fmt.Printf("demo: "+format+"\n", args...) }
	const ns = "demo"
	if err := c.EnsureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	say("cluster %s is up (kube-apiserver, etcd, containerd, kubelet with localStorageCapacityIsolation=false: the kubelet enforces no sizeLimit)", c.NodeName())
	s := startStack(ctx, t, c, stackOptions{})
	say("running in the cluster's network namespace %s:", c.NetnsPath())
	say("  emptydir-exporter    http://%s   (filesystem source, every %s)", scnExporterAddr, exporterInterval)
	say("  emptydir-remediator  http://%s   (bearer token on /webhook, live re-check at the exporter)", scnRemediatorAddr)
	say("  Prometheus           %s  (scrape/eval 5s, rules/emptydir-guard.rules.yml)", s.mon.PrometheusURL())
	say("  Alertmanager         %s  (deploy/alertmanager/alertmanager.yml, group_wait 1s) -> webhook via a recorder at %s", s.mon.AlertmanagerURL(), scnRecorderAddr)
	am := watchAlertmanager(ctx, s.mon)
	defer am.Stop()

	seed := runPod(ctx, t, c, c.SeedPod(ns, "empty-test1"))
	tr := trackPod(ctx, c, seed)
	defer tr.Stop()
	uid := string(seed.UID)
	say("pod %s/%s (uid %s) runs with emptyDir \"empty\" {sizeLimit: 1Mi}", ns, seed.Name, uid)
	say("writing 10 MB into it: kubectl exec %s -- dd if=/dev/zero of=/test/test.file bs=1K count=10000", seed.Name)
	w, err := writeSeed(ctx, c, seed, tr, 10000)
	if err != nil {
		t.Fatal(err)
	}
	say("t=0: dd done; du -s -B1 of the volume: %d bytes (limit 1048576)", w.du)
	at := func(x time.Time) string { return fmt.Sprintf("t=%+6.1fs", x.Sub(w.t0).Seconds()) }

	type step struct {
		name  string
		check func() (time.Time, string, bool)
		done  bool
		at    time.Time
	}
	steps := []*step{
		{name: "metric seen", check: func() (time.Time, string, bool) {
			res, err := s.mon.Query(ctx, fmt.Sprintf(`emptydir_used_bytes{uid=%q}[5m]`, uid))
			if err != nil {
				return time.Time{}, "", false
			}
			p, ok := firstOver(res, seedLimit)
			return p.Time, fmt.Sprintf("Prometheus scraped emptydir_used_bytes=%.0f (> emptydir_limit_bytes 1048576)", p.Value), ok
		}},
		{name: "alert fired", check: func() (time.Time, string, bool) {
			alerts, err := s.mon.PrometheusAlerts(ctx)
			if err != nil {
				return time.Time{}, "", false
			}
			for _, a := range alerts {
				if a.Labels["alertname"] == "EmptyDirOverLimit" && string(a.Labels["uid"]) == uid && a.State == "firing" {
					return a.ActiveAt, "EmptyDirOverLimit firing: " + string(a.Annotations["summary"]), true
				}
			}
			return time.Time{}, "", false
		}},
		{name: "in Alertmanager", check: func() (time.Time, string, bool) {
			x := am.at(uid)
			return x, "Alertmanager holds the alert (route remediation=\"evict\" -> receiver emptydir-remediator)", !x.IsZero()
		}},
		{name: "webhook received", check: func() (time.Time, string, bool) {
			hs := s.recorder.forUID(uid)
			if len(hs) == 0 {
				return time.Time{}, "", false
			}
			auth := "without a token"
			if hs[0].Authorization == "Bearer "+s.token {
				auth = "with the bearer token"
			}
			return hs[0].Received, "Alertmanager posted the webhook " + auth, true
		}},
		{name: "re-check", check: func() (time.Time, string, bool) {
			x, ok := logLineTime(c.LogPath(s.exporterLg), `msg="live measurement"`, "uid="+uid)
			return x, "the remediator re-measured the volume live at the exporter (/live/namespaces/" + ns + "/pods/" + seed.Name + ")", ok
		}},
		{name: "eviction", check: func() (time.Time, string, bool) {
			x := tr.evicted()
			return x, "the pod is evicted through the Eviction API (policy/v1)", !x.IsZero()
		}},
		{name: "remediator answer", check: func() (time.Time, string, bool) {
			for _, h := range s.recorder.forUID(uid) {
				if r, ok := outcomeFor(h, uid); ok {
					return h.Answered, fmt.Sprintf("remediator answered %d: outcome %s: %s", h.Code, r.Outcome, r.Message), true
				}
			}
			return time.Time{}, "", false
		}},
		{name: "event", check: func() (time.Time, string, bool) {
			list, err := c.Client().CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return time.Time{}, "", false
			}
			for _, e := range list.Items {
				if string(e.InvolvedObject.UID) == uid && e.Reason == remediator.EventEvicted {
					when, res := eventTime(e), ""
					if e.EventTime.IsZero() {
						// core/v1 timestamps are cut to the second: show when it was seen instead.
						when, res = time.Now(), " (seen by polling; Event timestamps have 1 s resolution)"
					}
					return when, fmt.Sprintf("Event %s %s: %s%s", e.Type, e.Reason, e.Message, res), true
				}
			}
			return time.Time{}, "", false
		}},
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		left := 0
		for _, st := range steps {
			if st.done {
				continue
			}
			if x, detail, ok := st.check(); ok {
				st.done, st.at = true, x
				say("%s  %-17s %s", at(x), st.name, detail)
			} else {
				left++
			}
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the scenario did not complete within 3 minutes (see the logs in %s/logs)", c.WorkDir())
		}
		time.Sleep(250 * time.Millisecond)
	}
	sort.SliceStable(steps, func(i, j int) bool { return steps[i].at.Before(steps[j].at) })
	var recap []string
	for _, st := range steps {
		recap = append(recap, fmt.Sprintf("%s %.1fs", st.name, st.at.Sub(w.t0).Seconds()))
	}
	say("in order: %s", strings.Join(recap, " -> "))
	fams, err := scrape(ctx, c, "http://"+scnRemediatorAddr+"/metrics")
	if err == nil {
		n, _ := sample(fams, "emptydir_remediator_evictions_total", map[string]string{"result": "evicted"})
		say("emptydir_remediator_evictions_total{result=\"evicted\"} = %.0f", n)
	}
	say("for comparison: the kubelet at its defaults (localStorageCapacityIsolation on, volumeStatsAggPeriod 1m) took 48-50 s for the same pod in TestSeedScenario (docs/e2e.md); on this node it never acts")

	if os.Getenv("KEEP") != "1" {
		say("done; tearing everything down (KEEP=1 keeps it running)")
		return
	}
	play := runPod(ctx, t, c, c.SeedPod(ns, "empty-test2"))
	nsenter := "nsenter --net=" + c.NetnsPath()
	kubectl := fmt.Sprintf("%s kubectl --kubeconfig %s", nsenter, c.KubeconfigPath())
	say("KEEP=1: everything keeps running until Ctrl-C. Prometheus and Alertmanager listen inside the network namespace:")
	say("  %s curl -s 'http://%s/api/v1/query?query=emptydir_used_bytes'", nsenter, scnPrometheusAddr)
	say("  %s curl -s 'http://%s/api/v1/alerts'", nsenter, scnPrometheusAddr)
	say("  %s curl -s 'http://%s/api/v2/alerts'", nsenter, scnAlertmanagerAddr)
	say("  %s curl -s 'http://%s/metrics' | grep ^emptydir_remediator_", nsenter, scnRemediatorAddr)
	say("  %s get pods,events -n %s", kubectl, ns)
	say("try it again with a fresh pod:")
	say("  %s exec -n %s %s -- dd if=/dev/zero of=/test/test.file bs=1K count=10000", kubectl, ns, play.Name)
	say("logs: %s/logs/", c.WorkDir())
	<-ctx.Done() // Ctrl-C: TestMain stops the cluster (and these processes with it)
}
