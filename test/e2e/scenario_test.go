package e2e

import (
	"context"
	"fmt"
	"log"
	"math"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/emptydir-guard/emptydir-guard/exporter"
	"github.com/emptydir-guard/emptydir-guard/internal/dashboards"
	"github.com/emptydir-guard/emptydir-guard/internal/testbin"
	"github.com/emptydir-guard/emptydir-guard/remediator"
	"github.com/emptydir-guard/emptydir-guard/test/cluster"
	"github.com/emptydir-guard/emptydir-guard/test/framework"
	"github.com/emptydir-guard/emptydir-guard/test/monitoring"
)

const (
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

// TestSeedScenario is the acceptance story of docs/design.md on real parts, twice: on the shared
// cluster (localStorageCapacityIsolation=false: only emptyDir guard enforces) and on a second
// cluster with isolation on and the kubelet's default volumeStatsAggPeriod (both enforce).
// It asserts the functional outcomes and prints the timings as a table (not asserted).
func TestSeedScenario(t *testing.T) {
	requireCluster(t)
	var rows []timing
	t.Run("isolation=false", func(t *testing.T) {
		rows = append(rows, scenarioOnlyWeEnforce(t, sharedCluster(t), os.Getenv(dashboardCaptureEnv))...)
	})
	t.Run("isolation=true", func(t *testing.T) { rows = append(rows, scenarioBothEnforce(t)...) })
	printTable(t, rows)
}

// scenarioOnlyWeEnforce is the seed scenario on c, a cluster of framework.SharedClusterOptions
// (the kubelet's checks off) on either runtime (TestCRIONode runs it on CRI-O). With a
// captureTo file, the dashboards' data over the scenario is written there (captureDashboards).
func scenarioOnlyWeEnforce(t *testing.T, c *cluster.Cluster, captureTo string) []timing {
	ctx, cancel := context.WithTimeout(rootCtx, 12*time.Minute)
	defer cancel()
	ns := framework.Namespace(ctx, t, c, "scn")
	s := framework.StartStack(ctx, t, c, framework.StackOptions{
		RemediatorArgs:        []string{"--policy.pod-selector=" + framework.DryRunOnlyLabel + "!=true"},
		DryRun:                true,
		BrokenKubeletExporter: true,
	})
	stackStarted := time.Now()
	am := framework.WatchAlertmanager(ctx, s.Mon)
	defer am.Stop()

	// The pods: the seed, and one per negative case.
	seed := framework.RunPod(ctx, t, c, c.SeedPod(ns, "empty-test1"))
	under := framework.RunPod(ctx, t, c, c.SeedPod(ns, "under-limit"))
	one := intstr.FromInt32(1)
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "pdb-guarded", Namespace: ns},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &one,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "pdb-guarded"}}}}
	if _, err := c.Client().PolicyV1().PodDisruptionBudgets(ns).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Its container has an ephemeral-storage limit too, far from reached (10 MB of 100Mi), so
	// that the dashboards' pod and container panels have the pod they are checked on.
	guardedPod := c.SeedPod(ns, "pdb-guarded")
	withStorageLimit(guardedPod, "100Mi")
	guarded := framework.RunPod(ctx, t, c, guardedPod)
	dryPod := c.SeedPod(ns, "dry-run-only")
	dryPod.Labels[framework.DryRunOnlyLabel] = "true"
	dry := framework.RunPod(ctx, t, c, dryPod)
	recreated := framework.RunPod(ctx, t, c, c.SeedPod(ns, "recreated"))
	trackers := map[string]*framework.PodTracker{}
	for _, p := range []*corev1.Pod{seed, under, guarded, dry} {
		trackers[p.Name] = framework.TrackPod(ctx, c, p)
		defer trackers[p.Name].Stop()
	}

	// The seed write, then the others.
	w, err := framework.WriteSeed(ctx, c, seed, trackers[seed.Name], 10000)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range []struct {
		p   *corev1.Pod
		kib int
	}{{under, 512}, {guarded, 10000}, {dry, 10000}} {
		if _, err := framework.WriteSeed(ctx, c, x.p, trackers[x.p.Name], x.kib); err != nil {
			t.Fatal(err)
		}
	}

	// (1)–(3): metric, alert, webhook with auth, live re-check, eviction, Event, counters.
	row := oursTimeline(ctx, t, c, s, w, am, true)
	row.cluster = "isolation=false"
	framework.Eventually(t, time.Minute, 500*time.Millisecond, "evicted seed pod gone or Failed", func() (bool, string) {
		_, failed, gone, _, _ := w.Tracker.Snapshot()
		return !gone.IsZero() || !failed.IsZero(), "still there"
	})
	// A repeat of the same alert (Alertmanager's repeat_interval, an HA peer) does not evict again.
	code, resp, raw, err := framework.PostWebhook(ctx, c, framework.StackRemediatorAddr, s.Token, framework.OverLimitPayload(c.NodeName(), ns, seed.Name, string(seed.UID), "empty"))
	if err != nil || code != http.StatusOK || len(resp.Alerts) != 1 || resp.Alerts[0].Outcome == remediator.OutcomeEvicted {
		t.Errorf("repeated alert for the evicted seed pod: %d %s %v, want 200 and no second eviction", code, raw, err)
	}

	// A webhook without the token (or with a wrong one) is rejected and changes nothing.
	for _, tok := range []string{"", "not-" + s.Token} {
		code, _, raw, err := framework.PostWebhook(ctx, c, framework.StackRemediatorAddr, tok, framework.OverLimitPayload(c.NodeName(), ns, guarded.Name, string(guarded.UID), "empty"))
		if err != nil || code != http.StatusUnauthorized {
			t.Errorf("webhook with token %q: %d %s %v, want 401", tok, code, raw, err)
		}
	}

	// PDB: the API answers 429 (no controller-manager computes disruptionsAllowed), the
	// remediator answers Alertmanager 5xx pdb_blocked (so it retries), counts each blocked
	// eviction once, records an Event, and the pod stays.
	framework.Eventually(t, 2*time.Minute, time.Second, "PDB-covered pod counted pdb_blocked once per delivery", func() (bool, string) {
		fams, err := framework.Scrape(ctx, c, "http://"+framework.StackRemediatorAddr+"/metrics")
		if err != nil {
			return false, err.Error()
		}
		n, _ := framework.Sample(fams, "emptydir_remediator_evictions_total", map[string]string{"result": "pdb_blocked"})
		delivered := s.Recorder.ForUID(string(guarded.UID))
		return n >= 1 && int(n) == len(delivered), fmt.Sprintf("pdb_blocked=%v, deliveries=%d", n, len(delivered))
	})
	for _, h := range s.Recorder.ForUID(string(guarded.UID)) {
		if r, ok := framework.OutcomeFor(h, string(guarded.UID)); h.Code < 500 || !ok || r.Outcome != remediator.OutcomePDBBlocked {
			t.Errorf("remediator answered the PDB-covered pod's alert %d %+v, want 5xx pdb_blocked so Alertmanager retries", h.Code, h.Response)
		}
	}
	requireEvent(ctx, t, c, guarded, remediator.EventEvictionBlocked)

	// Under its limit: an alert (as if stale) re-checks live and evicts nothing.
	code, resp, raw, err = framework.PostWebhook(ctx, c, framework.StackRemediatorAddr, s.Token, framework.OverLimitPayload(c.NodeName(), ns, under.Name, string(under.UID), "empty"))
	if err != nil || code != http.StatusOK || len(resp.Alerts) != 1 || resp.Alerts[0].Outcome != remediator.OutcomeSkipped || resp.Alerts[0].Reason != remediator.SkipNotOverLimit {
		t.Errorf("alert for the pod under its limit: %d %s %v, want 200 skipped/not_over_limit", code, raw, err)
	}

	// Dry run: a second remediator with --eviction.dry-run, asked directly about an over-limit pod the
	// main one leaves alone (pod selector): it re-checks, says it would evict, evicts nothing.
	code, resp, raw, err = framework.PostWebhook(ctx, c, framework.StackDryRunAddr, s.Token, framework.OverLimitPayload(c.NodeName(), ns, dry.Name, string(dry.UID), "empty"))
	if err != nil || code != http.StatusOK || len(resp.Alerts) != 1 || resp.Alerts[0].Outcome != remediator.OutcomeDryRun {
		t.Errorf("dry-run remediator: %d %s %v, want 200 with outcome dry_run", code, raw, err)
	} else if used := resp.Alerts[0].UsedBytes; used == nil || *used < 10240000 {
		t.Errorf("dry-run re-check used %v bytes, want the live ~10 MB", used)
	}
	fams, err := framework.Scrape(ctx, c, "http://"+framework.StackDryRunAddr+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := framework.Sample(fams, "emptydir_remediator_evictions_total", map[string]string{"result": "dry_run"}); n != 1 {
		t.Errorf("dry-run remediator evictions_total{result=dry_run} = %v, want 1", n)
	}
	if n, _ := framework.Sample(fams, "emptydir_remediator_evictions_total", map[string]string{"result": "evicted"}); n != 0 {
		t.Errorf("dry-run remediator evictions_total{result=evicted} = %v, want 0", n)
	}
	requireEvent(ctx, t, c, dry, remediator.EventOverLimit)
	framework.Eventually(t, time.Minute, time.Second, "main remediator skipped the dry-run-only pod (selector)", func() (bool, string) {
		fams, err := framework.Scrape(ctx, c, "http://"+framework.StackRemediatorAddr+"/metrics")
		if err != nil {
			return false, err.Error()
		}
		n, _ := framework.Sample(fams, "emptydir_remediator_skips_total", map[string]string{"reason": "selector"})
		return n >= 1, fmt.Sprintf("skips{selector}=%v", n)
	})

	// A stale alert for a recreated pod (same name, new UID) evicts nothing.
	oldUID := string(recreated.UID)
	zero := int64(0)
	if err := c.Client().CoreV1().Pods(ns).Delete(ctx, recreated.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, 250*time.Millisecond, "old pod gone", func() (bool, string) {
		_, err := c.Client().CoreV1().Pods(ns).Get(ctx, recreated.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	// The new pod is over its limit too: only the UID differs. The main remediator judges the
	// UID first, so the stale alert is skipped as recreated; the new pod's own alert, which the
	// chain raises later, is the pod selector's to skip.
	fresh := c.SeedPod(ns, "recreated")
	fresh.Labels[framework.DryRunOnlyLabel] = "true"
	recreated = framework.RunPod(ctx, t, c, fresh)
	trackers["recreated"] = framework.TrackPod(ctx, c, recreated)
	defer trackers["recreated"].Stop()
	if _, err := framework.WriteSeed(ctx, c, recreated, trackers["recreated"], 10000); err != nil {
		t.Fatal(err)
	}
	code, resp, raw, err = framework.PostWebhook(ctx, c, framework.StackRemediatorAddr, s.Token, framework.OverLimitPayload(c.NodeName(), ns, recreated.Name, oldUID, "empty"))
	if err != nil || code != http.StatusOK || len(resp.Alerts) != 1 || resp.Alerts[0].Outcome != remediator.OutcomeSkipped || resp.Alerts[0].Reason != remediator.SkipRecreated {
		t.Errorf("stale alert for the recreated pod: %d %s %v, want 200 skipped/recreated", code, raw, err)
	}

	// Every dashboard query returns data (the stack's exporter publishes every opt-in family).
	checkDashboards(ctx, t, s.Mon, map[string]string{"namespace": ns, "pod": guarded.Name}, true)
	if captureTo != "" {
		growForCapture(ctx, t, c, guarded)
		captureDashboards(ctx, t, s.Mon, map[string]string{"namespace": ns, "pod": guarded.Name}, stackStarted, time.Now(), captureTo)
	}

	// The pods that must not have been evicted are still running, same instance.
	for _, p := range []*corev1.Pod{under, guarded, dry, recreated} {
		requireNotEvicted(ctx, t, c, p, trackers[p.Name])
	}
	fams, err = framework.Scrape(ctx, c, "http://"+framework.StackRemediatorAddr+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := framework.Sample(fams, "emptydir_remediator_evictions_total", map[string]string{"result": "evicted"}); n != 1 {
		t.Errorf("main remediator evictions_total{result=evicted} = %v, want exactly 1 (the seed pod)", n)
	}
	return []timing{row}
}

func scenarioBothEnforce(t *testing.T) []timing {
	requireCluster(t)
	testbin.Path(t, "emptydir-exporter")
	ctx, cancel := context.WithTimeout(rootCtx, 15*time.Minute)
	defer cancel()
	// The remediator never touches nsKubelet, so that pod measures the kubelet on its own.
	e := startTwoEnforcers(ctx, t, "race-", "kubelet-only-")
	c, s, am, nsRace, nsKubelet := e.c, e.s, e.am, e.ours, e.kubeletOnly

	seed := framework.RunPod(ctx, t, c, c.SeedPod(nsRace, "empty-test1"))
	kub := framework.RunPod(ctx, t, c, c.SeedPod(nsKubelet, "empty-test1"))
	under := framework.RunPod(ctx, t, c, c.SeedPod(nsRace, "under-limit"))
	// Twins of both that write below 25 directories of 200-byte names (past PATH_MAX): the
	// kubelet's walk fails on them (pathmax_test.go).
	deepOurs := framework.RunPod(ctx, t, c, deepPod(c, nsRace))
	deepKub := framework.RunPod(ctx, t, c, deepPod(c, nsKubelet))
	trSeed, trKub, trUnder := framework.TrackPod(ctx, c, seed), framework.TrackPod(ctx, c, kub), framework.TrackPod(ctx, c, under)
	trDeepOurs, trDeepKub := framework.TrackPod(ctx, c, deepOurs), framework.TrackPod(ctx, c, deepKub)
	defer trSeed.Stop()
	defer trKub.Stop()
	defer trUnder.Stop()
	defer trDeepOurs.Stop()
	defer trDeepKub.Stop()
	sw := watchSummary(ctx, c)
	defer sw.Stop()

	// All writes at once, so both enforcers face the same node state.
	var wg sync.WaitGroup
	var ws [4]framework.SeedWrite
	var errs [4]error
	for i, x := range []struct {
		p    *corev1.Pod
		tr   *framework.PodTracker
		deep bool
	}{{seed, trSeed, false}, {kub, trKub, false}, {deepOurs, trDeepOurs, true}, {deepKub, trDeepKub, true}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if x.deep {
				ws[i], errs[i] = framework.WriteDeep(ctx, c, x.p, x.tr, 10000)
			} else {
				ws[i], errs[i] = framework.WriteSeed(ctx, c, x.p, x.tr, 10000)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, w := range ws {
		sw.wrote(w)
	}
	if _, err := framework.WriteSeed(ctx, c, under, trUnder, 512); err != nil {
		t.Fatal(err)
	}

	// Who evicts the seed pod first? Ours is an Eviction API call (deletionTimestamp, our
	// Event); the kubelet's is a local kill: phase Failed, reason Evicted, its own message.
	ours := oursTimeline(ctx, t, c, s, ws[0], am, false)
	ours.cluster = "isolation=true"
	term, failed, gone, reason, msg := trSeed.Snapshot()
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
	// The deep twin in our namespace: only emptyDir guard can see it over its limit, and does.
	deep := oursTimeline(ctx, t, c, s, ws[2], am, true)
	deep.cluster = "isolation=true"
	deep.enforcer = "emptyDir guard (path > PATH_MAX)"

	// The kubelet on its own, at its defaults: the e2e package's one pin of the kubelet
	// behaviour the project stands in for (Failed/Evicted with its own message, no API call).
	framework.Eventually(t, evictionDeadline, time.Second, "kubelet evicts the pod in the denied namespace", func() (bool, string) {
		_, failed, gone, reason, msg := trKub.Snapshot()
		return !failed.IsZero() || !gone.IsZero(), fmt.Sprintf("reason=%q message=%q", reason, msg)
	})
	term, failed, gone, reason, msg = trKub.Snapshot()
	if !term.IsZero() || !gone.IsZero() || reason != "Evicted" || !strings.Contains(msg, kubeletEvictMsg) {
		t.Errorf("kubelet-only pod: terminating=%v gone=%v reason=%q message=%q, want the kubelet's own eviction (Failed/Evicted, %q) and no API eviction",
			term, gone, reason, msg, kubeletEvictMsg)
	}
	if evs := framework.PodEvents(ctx, t, c, kub, remediator.EventEvicted); len(evs) != 0 {
		t.Errorf("remediator evicted a pod of a denied namespace: %v", evs)
	}
	kubRow := timing{cluster: "isolation=true", pod: nsKubelet + "/" + kub.Name, enforcer: "kubelet alone (namespace denied to us)",
		evicted: failed.Sub(ws[1].T0), note: "status: " + reason + ": " + msg}
	if ft, ok := framework.FirstSample(ctx, s.Mon, fmt.Sprintf(`emptydir_used_bytes{uid=%q}[20m]`, kub.UID), framework.SeedLimit); ok {
		kubRow.metric = ft.Sub(ws[1].T0)
	}
	if ft, ok := framework.FirstSample(ctx, s.Mon, fmt.Sprintf(`ALERTS{alertname="EmptyDirOverLimit",alertstate="firing",uid=%q}[20m]`, kub.UID), 0); ok {
		kubRow.alert = ft.Sub(ws[1].T0)
	}
	if x := am.At(string(kub.UID)); !x.IsZero() {
		kubRow.amSeen = x.Sub(ws[1].T0)
	}
	if hs := s.Recorder.ForUID(string(kub.UID)); len(hs) > 0 {
		kubRow.webhook = hs[0].Received.Sub(ws[1].T0)
		if r, ok := framework.OutcomeFor(hs[0], string(kub.UID)); ok {
			kubRow.note += fmt.Sprintf("; our remediator answered %s/%s", r.Outcome, r.Reason)
			if r.Outcome != remediator.OutcomeSkipped || r.Reason != "namespace" {
				t.Errorf("remediator's answer for the pod of the denied namespace: %+v, want skipped/namespace", r)
			}
		}
	}
	// The deep twin in the kubelet's namespace: never evicted, its volume gone from the Summary.
	blind := requireKubeletBlind(ctx, t, c, sw, ws[1], ws[3], failed)
	requireNotEvicted(ctx, t, c, under, trUnder)
	// Exactly the pods with our Event were evicted by us: the race pod if we won, the deep one.
	ourEvictions := 0
	for _, p := range []*corev1.Pod{seed, deepOurs} {
		if len(framework.PodEvents(ctx, t, c, p, remediator.EventEvicted)) > 0 {
			ourEvictions++
		}
	}
	fams, err := framework.Scrape(ctx, c, "http://"+framework.StackRemediatorAddr+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := framework.Sample(fams, "emptydir_remediator_evictions_total", map[string]string{"result": "evicted"}); int(n) != ourEvictions {
		t.Errorf("remediator evictions_total{result=evicted} = %v, want %d (the pods with its %s Event)", n, ourEvictions, remediator.EventEvicted)
	}
	return []timing{ours, kubRow, deep, blind}
}

// startIsolatedCluster starts a cluster of its own whose kubelet enforces sizeLimit at its
// defaults (localStorageCapacityIsolation on, volumeStatsAggPeriod 1m with jitter), and stops
// it when the test ends or is interrupted.
func startIsolatedCluster(ctx context.Context, t testing.TB) *cluster.Cluster {
	t.Helper()
	logger := log.New(os.Stderr, "", log.Ltime|log.Lmicroseconds)
	return ownCluster(ctx, t, cluster.Options{
		LocalStorageCapacityIsolation: true,
		VolumeStatsAggPeriod:          0, // the kubelet's default (1m, with jitter)
		Logf:                          logger.Printf,
	})
}

// oursTimeline waits until the seed pod is evicted and reconstructs the chain from the
// evidence each component leaves: Prometheus' raw samples (scrape time), the ALERTS series
// (evaluation time), Alertmanager's API, the recorded webhook, the exporter's log line of the
// live measurement, the pod's deletion and the remediator's Event. With strict, it asserts
// that emptyDir guard did each step (on the isolation=true cluster the kubelet may win).
func oursTimeline(ctx context.Context, t testing.TB, c *cluster.Cluster, s *framework.Stack, w framework.SeedWrite, am *framework.FirstSeen, strict bool) timing {
	t.Helper()
	uid := string(w.Pod.UID)
	row := timing{pod: w.Pod.Namespace + "/" + w.Pod.Name, enforcer: "emptyDir guard"}
	if w.Du <= framework.SeedLimit {
		t.Fatalf("du says %d bytes after writing 10 MB", w.Du)
	}
	framework.Eventually(t, evictionDeadline, 250*time.Millisecond, "seed pod evicted", func() (bool, string) {
		return !w.Tracker.Evicted().IsZero(), "not yet"
	})
	row.evicted = w.Tracker.Evicted().Sub(w.T0)

	// (1) used bytes in Prometheus = du; limit = 1Mi; the measurement's age at scrape.
	used, err := s.Mon.Query(ctx, fmt.Sprintf(`emptydir_used_bytes{uid=%q,volume="empty"}[20m]`, uid))
	if err != nil {
		t.Fatal(err)
	}
	ages, err := s.Mon.Query(ctx, fmt.Sprintf(`emptydir_measurement_age_seconds{uid=%q,volume="empty"}[20m]`, uid))
	if err != nil {
		t.Fatal(err)
	}
	// The age comes in the same scrape as the usage (the trigger's), so a sample of each
	// shares its timestamp: a usage without its age would date nothing.
	ageAt := map[time.Time]float64{}
	for _, smp := range ages {
		for _, p := range smp.Values {
			ageAt[p.Time] = p.Value
			row.ageMax = math.Max(row.ageMax, p.Value)
		}
	}
	first, ok := framework.FirstOver(used, framework.SeedLimit)
	if !ok {
		t.Errorf("Prometheus never had emptydir_used_bytes over the limit for %s (%v)", uid, used)
	} else {
		row.metric = first.Time.Sub(w.T0)
		row.ageAtScrape = ageAt[first.Time]
		if _, ok := ageAt[first.Time]; !ok {
			t.Errorf("no emptydir_measurement_age_seconds in the scrape of %v that carried the first over-limit usage", first.Time)
		}
	}
	// Every over-limit value is du's, or part of the write from a walk that began while dd
	// was still writing (the eviction may follow such a value before a full one is published).
	for _, smp := range used {
		for _, p := range smp.Values {
			age, dated := ageAt[p.Time]
			walkStart := p.Time.Add(-secs(age))
			if !dated && p.Value > framework.SeedLimit {
				t.Errorf("emptydir_used_bytes = %v at %v has no emptydir_measurement_age_seconds in its scrape", p.Value, p.Time)
				continue
			}
			if p.Value > framework.SeedLimit && int64(p.Value) != w.Du && (int64(p.Value) > w.Du || !walkStart.Before(w.T0)) {
				t.Errorf("emptydir_used_bytes in Prometheus = %v at %v (walk began %v, dd ended %v), du -s -B1 = %d",
					p.Value, p.Time, walkStart, w.T0, w.Du)
			}
		}
	}
	lim, err := s.Mon.Query(ctx, fmt.Sprintf(`emptydir_limit_bytes{uid=%q,volume="empty"}[20m]`, uid))
	if err != nil || len(lim) != 1 || lim[0].Value != framework.SeedLimit {
		t.Errorf("emptydir_limit_bytes = %v (%v), want %d", lim, err, framework.SeedLimit)
	}

	// (2) the alert fires; Alertmanager has it and posts it to the remediator with the token.
	if ft, ok := framework.FirstSample(ctx, s.Mon, fmt.Sprintf(`ALERTS{alertname="EmptyDirOverLimit",alertstate="firing",uid=%q}[20m]`, uid), 0); ok {
		row.alert = ft.Sub(w.T0)
	} else if strict {
		t.Errorf("EmptyDirOverLimit never fired for %s", uid)
	}
	if at := am.At(uid); !at.IsZero() {
		row.amSeen = at.Sub(w.T0)
	} else if strict {
		t.Errorf("Alertmanager never held EmptyDirOverLimit for %s", uid)
	}
	hooks := s.Recorder.ForUID(uid)
	if len(hooks) == 0 {
		if strict {
			t.Errorf("Alertmanager never posted EmptyDirOverLimit for %s to the remediator", uid)
		}
	} else {
		h := hooks[0]
		row.webhook = h.Received.Sub(w.T0)
		if h.Authorization != "Bearer "+s.Token {
			t.Errorf("Alertmanager's webhook carried Authorization %q, want the bearer token", h.Authorization)
		}
		res, found := framework.OutcomeFor(h, uid)
		if strict && (h.Code != http.StatusOK || !found || res.Outcome != remediator.OutcomeEvicted || res.Source == "" ||
			res.UsedBytes == nil || *res.UsedBytes <= framework.SeedLimit) {
			t.Errorf("remediator answered Alertmanager %d %+v, want 200 with outcome evicted after a live re-check over the limit", h.Code, h.Response)
		}
	}

	// (3) the live re-check at the exporter, the eviction through the API, the Event, the counter.
	if at, ok := framework.LogLineTime(c.LogPath(s.ExporterLog), `msg="live measurement"`, "uid="+uid); ok {
		row.recheck = at.Sub(w.T0)
	} else if strict {
		t.Errorf("the exporter never served a live measurement of %s", uid)
	}
	// The Eviction API deletes the pod (gracefully: terminating, or at once with the seed
	// pod's grace period 0); the kubelet's own eviction leaves it Failed instead. That the
	// remediator goes through the Eviction API and not a plain delete shows in the PDB case.
	term, failed, gone, _, _ := w.Tracker.Snapshot()
	if strict && ((term.IsZero() && gone.IsZero()) || (!failed.IsZero() && (term.IsZero() || failed.Before(term)))) {
		t.Errorf("the seed pod was not deleted through the API (terminating %v, gone %v, failed %v)", term, gone, failed)
	}
	if evs := framework.PodEvents(ctx, t, c, w.Pod, remediator.EventEvicted); len(evs) > 0 {
		e := evs[0]
		if !strings.Contains(e.Message, `"empty"`) {
			t.Errorf("Event %s message %q does not name the volume", e.Reason, e.Message)
		}
		if et := framework.EventTime(e); !et.IsZero() {
			row.event = et.Sub(w.T0)
		}
		row.note = "Event " + e.Reason + ": " + e.Message
	} else if strict {
		t.Errorf("no %s Event on the seed pod", remediator.EventEvicted)
	}
	if strict {
		framework.Eventually(t, 30*time.Second, time.Second, "remediator counts the eviction", func() (bool, string) {
			fams, err := framework.Scrape(ctx, c, "http://"+framework.StackRemediatorAddr+"/metrics")
			if err != nil {
				return false, err.Error()
			}
			n, _ := framework.Sample(fams, "emptydir_remediator_evictions_total", map[string]string{"result": "evicted"})
			a, _ := framework.Sample(fams, "emptydir_remediator_alerts_total", map[string]string{"outcome": "evicted"})
			return n >= 1 && a >= 1, fmt.Sprintf("evictions{evicted}=%v alerts{evicted}=%v", n, a)
		})
	}
	return row
}

// secs converts seconds, as Prometheus gives them, to a duration.
func secs(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }

func requireEvent(ctx context.Context, t *testing.T, c *cluster.Cluster, p *corev1.Pod, reason string) {
	t.Helper()
	framework.Eventually(t, time.Minute, time.Second, fmt.Sprintf("%s Event on %s naming the volume", reason, p.Name), func() (bool, string) {
		evs := framework.PodEvents(ctx, t, c, p, reason)
		for _, e := range evs {
			if strings.Contains(e.Message, `"empty"`) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events", len(evs))
	})
}

func requireNotEvicted(ctx context.Context, t *testing.T, c *cluster.Cluster, p *corev1.Pod, tr *framework.PodTracker) {
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
	if tr != nil && !tr.Evicted().IsZero() {
		t.Errorf("pod %s/%s was seen terminating or failed at %s", p.Namespace, p.Name, tr.Evicted())
	}
	if evs := framework.PodEvents(ctx, t, c, p, remediator.EventEvicted); len(evs) != 0 {
		t.Errorf("pod %s/%s has %s Events: %v", p.Namespace, p.Name, remediator.EventEvicted, evs[0].Message)
	}
}

// checkDashboards runs every dashboard query against the live Prometheus; each must return
// at least one series. Rates need two samples of a counter, so each query gets some time.
// Without optedIn (the exporter's defaults), the queries that read an opt-in family are left
// out: their panels say they stay empty (dashboards/generator checks that).
func checkDashboards(ctx context.Context, t *testing.T, mon *monitoring.Stack, vars map[string]string, optedIn bool) {
	t.Helper()
	qs := framework.DashboardExprs(t)
	if !optedIn {
		optIn := regexp.MustCompile(`\b(` + strings.Join(exporter.OptInFamilies, "|") + `)\b`)
		all := len(qs)
		qs = slices.DeleteFunc(qs, func(q dashboards.Query) bool { return optIn.MatchString(q.Expr) })
		t.Logf("%d of %d dashboard queries read opt-in families: not checked at the defaults", all-len(qs), all)
	}
	// The recommendations' recorded series (namespace_workload*) come from a 5-minute group and
	// need a day of history: their panels are checked by TestRecommendRulesMatchTheMethod's
	// series and dashboards/generator, not here.
	slow := regexp.MustCompile(`\bnamespace_workload[a-z_]*:`)
	before := len(qs)
	qs = slices.DeleteFunc(qs, func(q dashboards.Query) bool { return slow.MatchString(q.Expr) })
	t.Logf("%d dashboard queries read the recommendations' recorded series: not checked here", before-len(qs))
	// One deadline for all queries: a query tried after it still gets its one try.
	dctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	var noData, nanOnly []string
	for _, q := range qs {
		expr := dashboards.Substitute(q.Expr, vars)
		var res []monitoring.Sample
		err := wait.PollUntilContextCancel(dctx, time.Second, true, func(context.Context) (bool, error) {
			var err error
			if res, err = mon.Query(ctx, expr); err != nil {
				return false, fmt.Errorf("%s / %s: %w", q.Dashboard, q.Panel, err)
			}
			return len(res) > 0, nil
		})
		switch {
		case wait.Interrupted(err):
			noData = append(noData, fmt.Sprintf("%s / %s: %s", q.Dashboard, q.Panel, expr))
		case err != nil:
			t.Error(err)
		default:
			nan := true
			for _, r := range res {
				nan = nan && math.IsNaN(r.Value)
			}
			if nan {
				nanOnly = append(nanOnly, fmt.Sprintf("%s / %s", q.Dashboard, q.Panel))
			}
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
	fmt.Fprintf(&b, "\nSeed scenario timings (seconds after the end of the 10 MB dd into the 1Mi emptyDir; Prometheus scrape/eval 5s, Alertmanager group_wait 1s, exporter interval %s):\n", framework.ExporterInterval)
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
