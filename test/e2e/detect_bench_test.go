package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/emptydir-guard/emptydir-guard/internal/docsection"
	"github.com/emptydir-guard/emptydir-guard/internal/testbin"
	"github.com/emptydir-guard/emptydir-guard/test/cluster"
)

// The detect → evict distribution: writesPerEnforcer seed writes for each enforcer, each at a
// uniformly random moment of writeWindow, so that they land anywhere in the exporter's, the
// scrape's and the kubelet's cycles.
const (
	writesPerEnforcer = 16
	writeWindow       = 3 * time.Minute
)

// BenchmarkDetectEvict measures write → eviction as a distribution, for emptyDir guard and for
// the kubelet at its defaults, on one cluster with localStorageCapacityIsolation on. Half the
// seed pods are in a namespace the remediator may act on (the kubelet may too: whoever evicts
// first counts); the other half in one denied to it, so the kubelet enforces alone. It runs the
// scenario once whatever b.N is (make bench-detect passes -benchtime=1x), prints the tables,
// and writes them into docs/performance.md (section detect) when it passes. The cluster runs
// about 4.5 minutes.
func BenchmarkDetectEvict(b *testing.B) {
	requireCluster(b)
	testbin.Path(b, "emptydir-exporter")
	ctx, cancel := context.WithTimeout(rootCtx, 20*time.Minute)
	defer cancel()
	c := startIsolatedCluster(ctx, b)
	nsOurs, nsKubelet := "detect-ours-"+randSuffix(), "detect-kubelet-"+randSuffix()
	for _, ns := range []string{nsOurs, nsKubelet} {
		if err := c.EnsureNamespace(ctx, ns); err != nil {
			b.Fatal(err)
		}
	}
	// The caps (5 per node and namespace in 10m by default) are policy, not latency: lifted so
	// that every write is evicted as fast as the chain allows.
	s := startStack(ctx, b, c, stackOptions{remediatorArgs: []string{"--policy.namespace-deny=" + nsKubelet,
		"--eviction.max-global=0", "--eviction.max-per-node=0", "--eviction.max-per-namespace=0"}})
	am := watchAlertmanager(ctx, s.mon)
	defer am.Stop()
	stats := watchKubeletStats(ctx, c)
	defer stats.Stop()

	var pods []*corev1.Pod
	for _, ns := range []string{nsOurs, nsKubelet} {
		for i := range writesPerEnforcer {
			p := c.SeedPod(ns, fmt.Sprintf("seed-%02d", i))
			if _, err := c.Client().CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
				b.Fatalf("create pod %s/%s: %v", ns, p.Name, err)
			}
			pods = append(pods, p)
		}
	}
	trackers := make([]*podTracker, len(pods))
	for i, p := range pods {
		running, err := c.WaitForPodPhase(ctx, p.Namespace, p.Name, corev1.PodRunning)
		if err != nil {
			b.Fatal(err)
		}
		pods[i] = running
		trackers[i] = trackPod(ctx, c, running)
		defer trackers[i].Stop()
	}

	// Every write at its own random moment of the window, concurrently.
	start := time.Now()
	writes := make([]seedWrite, len(pods))
	errs := make([]error, len(pods))
	var wg sync.WaitGroup
	for i, p := range pods {
		at := time.Duration(rand.Int64N(int64(writeWindow)))
		wg.Go(func() {
			select {
			case <-ctx.Done():
				errs[i] = ctx.Err()
				return
			case <-time.After(time.Until(start.Add(at))):
			}
			writes[i], errs[i] = writeSeed(ctx, c, p, trackers[i], 10000)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	eventually(b, evictionDeadline, time.Second, "every seed pod evicted", func() (bool, string) {
		left := 0
		for _, tr := range trackers {
			if tr.evicted().IsZero() {
				left++
			}
		}
		return left == 0, fmt.Sprintf("%d pods not evicted yet", left)
	})

	var ours, kubelet []detectRow
	for i, w := range writes {
		term, failed, gone, reason, msg := w.tracker.snapshot()
		if term.IsZero() {
			term = gone // grace period 0: deleted at once
		}
		byKubelet := !failed.IsZero() && (term.IsZero() || failed.Before(term))
		if byKubelet && (reason != "Evicted" || !strings.Contains(msg, kubeletEvictMsg)) {
			b.Errorf("%s/%s: Failed with %q %q, not the kubelet's sizeLimit eviction", w.pod.Namespace, w.pod.Name, reason, msg)
		}
		row := detectRow{byKubelet: byKubelet}
		if pods[i].Namespace == nsOurs {
			row.timing = s.oursTimeline(ctx, b, w, am, false)
		}
		row.evicted = w.tracker.evicted().Sub(w.t0)
		if at := stats.at(string(w.pod.UID)); !at.IsZero() {
			row.kubeletStats = at.Sub(w.t0)
		}
		if pods[i].Namespace == nsOurs {
			ours = append(ours, row)
			continue
		}
		if !byKubelet {
			b.Errorf("%s/%s in the namespace denied to the remediator was not evicted by the kubelet (terminating %v)", w.pod.Namespace, w.pod.Name, term)
		}
		kubelet = append(kubelet, row)
	}
	if b.Failed() {
		return
	}
	body := detectTables(ours, kubelet)
	b.Log("\n" + body)
	b.ReportMetric(percentile(evictions(ours), 0.5).Seconds(), "s-p50-ours")
	b.ReportMetric(percentile(evictions(ours), 0.9).Seconds(), "s-p90-ours")
	b.ReportMetric(percentile(evictions(kubelet), 0.5).Seconds(), "s-p50-kubelet")
	// The shipped exporter interval writes section detect; another one
	// (EMPTYDIR_GUARD_EXPORTER_INTERVAL) its own section beside it.
	section, generator := "detect", "make bench-detect: BenchmarkDetectEvict"
	if exporterInterval != 5*time.Second {
		section = "detect-" + exporterInterval.String()
		generator = "EMPTYDIR_GUARD_EXPORTER_INTERVAL=" + exporterInterval.String() + " " + generator
	}
	if err := docsection.Replace("../../docs/performance.md", section, generator, body); err != nil {
		b.Error(err)
	}
}

// detectRow is one write: the scenario's timeline (offsets from the end of the dd), who
// evicted, and when the kubelet's cached volume stats first showed the volume over its limit.
type detectRow struct {
	timing
	byKubelet    bool
	kubeletStats time.Duration // 0: not seen (the pod went first)
}

func evictions(rows []detectRow) []time.Duration {
	out := make([]time.Duration, len(rows))
	for i, r := range rows {
		out[i] = r.evicted
	}
	return out
}

// percentile is the nearest-rank percentile p (0 < p ≤ 1) of ds; 0 for none.
func percentile(ds []time.Duration, p float64) time.Duration {
	ds = slices.Clone(ds)
	slices.Sort(ds)
	n := int(math.Ceil(p * float64(len(ds))))
	if n < 1 {
		return 0
	}
	return ds[n-1]
}

// stage is one step of a chain: its duration per write, where observed.
type stage struct {
	name, evidence string
	of             func(detectRow) (time.Duration, bool)
}

// oursStages split write → eviction of emptyDir guard at the observable timestamps.
var oursStages = []stage{
	{"write → the measurement the first over-limit scrape carried", "that scrape's time − its emptydir_measurement_age_seconds",
		func(r detectRow) (time.Duration, bool) {
			return r.metric - secs(r.ageAtScrape), r.metric > 0
		}},
	{"that measurement's age at the scrape", "emptydir_measurement_age_seconds at that scrape",
		func(r detectRow) (time.Duration, bool) { return secs(r.ageAtScrape), r.metric > 0 }},
	{"rule evaluation (no `for`)", "first ALERTS{alertstate=\"firing\"} sample − the scrape",
		func(r detectRow) (time.Duration, bool) { return r.alert - r.metric, r.alert > 0 && r.metric > 0 }},
	{"Prometheus → Alertmanager", "first 250 ms poll of Alertmanager's /api/v2/alerts listing it − evaluation",
		func(r detectRow) (time.Duration, bool) { return r.amSeen - r.alert, r.amSeen > 0 && r.alert > 0 }},
	{"group_wait → webhook", "webhook arrival at the recording proxy − in Alertmanager",
		func(r detectRow) (time.Duration, bool) { return r.webhook - r.amSeen, r.webhook > 0 && r.amSeen > 0 }},
	{"remediator → live re-check", "exporter's `live measurement` log line − webhook arrival",
		func(r detectRow) (time.Duration, bool) { return r.recheck - r.webhook, r.recheck > 0 && r.webhook > 0 }},
	{"re-check → evicted", "first 200 ms poll seeing the pod terminating/gone − re-check",
		func(r detectRow) (time.Duration, bool) { return r.evicted - r.recheck, r.recheck > 0 && !r.byKubelet }},
}

// kubeletStages split write → eviction of the kubelet.
var kubeletStages = []stage{
	{"volume stats refresh", "first 1 s poll of /stats/summary with the volume over its limit − write",
		func(r detectRow) (time.Duration, bool) { return r.kubeletStats, r.kubeletStats > 0 }},
	{"eviction manager loop", "first 200 ms poll seeing the pod Failed/Evicted − that poll",
		func(r detectRow) (time.Duration, bool) { return r.evicted - r.kubeletStats, r.kubeletStats > 0 }},
}

// detectTables renders the distribution and the stages as Markdown.
func detectTables(ours, kubelet []detectRow) string {
	d := func(x time.Duration) string { return fmt.Sprintf("%.1f", x.Seconds()) }
	var b strings.Builder
	kubeletWins := 0
	for _, r := range ours {
		if r.byKubelet {
			kubeletWins++
		}
	}
	fmt.Fprintf(&b, "Write → eviction, seconds after the end of a 10 MB `dd` into a 1Mi emptyDir; %d writes per enforcer at uniformly random moments of %s, all in one cluster (localStorageCapacityIsolation on, kubelet defaults). Exporter interval %s, scrape and evaluation 5s, Alertmanager group_wait 1s.\n\n",
		len(ours), writeWindow, exporterInterval)
	fmt.Fprintf(&b, "| enforcer | writes | p50 | p90 | max | p50 ratio ours/kubelet |\n| --- | --- | --- | --- | --- | --- |\n")
	po, pk := percentile(evictions(ours), 0.5), percentile(evictions(kubelet), 0.5)
	fmt.Fprintf(&b, "| emptyDir guard (kubelet enforcing too; evicted first by the kubelet: %d) | %d | %s | %s | %s | **%.2f** |\n",
		kubeletWins, len(ours), d(po), d(percentile(evictions(ours), 0.9)), d(percentile(evictions(ours), 1)), po.Seconds()/pk.Seconds())
	fmt.Fprintf(&b, "| kubelet alone (namespace denied to the remediator) | %d | %s | %s | %s | 1 |\n\n",
		len(kubelet), d(pk), d(percentile(evictions(kubelet), 0.9)), d(percentile(evictions(kubelet), 1)))
	fmt.Fprintf(&b, "Target p90(ours) ≤ ⅕ median(kubelet): %s s vs %s s → **%.2f** of the kubelet's median.\n\n",
		d(percentile(evictions(ours), 0.9)), d(pk), percentile(evictions(ours), 0.9).Seconds()/pk.Seconds())
	fmt.Fprintf(&b, "Where the seconds go (p50 / p90 / max of each stage over the writes where both ends were observed):\n\n")
	fmt.Fprintf(&b, "| enforcer | stage | p50 | p90 | max | from |\n| --- | --- | --- | --- | --- | --- |\n")
	for _, x := range []struct {
		who    string
		rows   []detectRow
		stages []stage
	}{{"emptyDir guard", ours, oursStages}, {"kubelet", kubelet, kubeletStages}} {
		for _, st := range x.stages {
			var ds []time.Duration
			for _, r := range x.rows {
				if v, ok := st.of(r); ok {
					ds = append(ds, v)
				}
			}
			if len(ds) == 0 {
				fmt.Fprintf(&b, "| %s | %s | - | - | - | %s |\n", x.who, st.name, st.evidence)
				continue
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", x.who, st.name,
				d(percentile(ds, 0.5)), d(percentile(ds, 0.9)), d(percentile(ds, 1)), st.evidence)
		}
	}
	return b.String()
}

// watchKubeletStats polls the kubelet's Summary API (through the API server's node proxy)
// every second and records when each pod's volume "empty" was first reported over the seed
// limit, per pod UID: the moment the kubelet's own cached volume stats caught up with the write.
func watchKubeletStats(ctx context.Context, c *cluster.Cluster) *firstSeen {
	return pollFirstSeen(ctx, time.Second, func(ctx context.Context) ([]string, error) {
		raw, err := c.Client().CoreV1().RESTClient().Get().
			AbsPath("/api/v1/nodes", c.NodeName(), "proxy", "stats", "summary").DoRaw(ctx)
		if err != nil {
			return nil, err
		}
		var sum statsapi.Summary
		if err := json.Unmarshal(raw, &sum); err != nil {
			return nil, err
		}
		var over []string
		for _, p := range sum.Pods {
			for _, v := range p.VolumeStats {
				if v.Name == "empty" && v.UsedBytes != nil && *v.UsedBytes > seedLimit {
					over = append(over, p.PodRef.UID)
				}
			}
		}
		return over, nil
	})
}
