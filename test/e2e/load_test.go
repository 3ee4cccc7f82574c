package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/emptydir-guard/emptydir-guard/internal/testbin"
	"github.com/emptydir-guard/emptydir-guard/remediator"
	"github.com/emptydir-guard/emptydir-guard/test/cluster"
	"github.com/emptydir-guard/emptydir-guard/test/framework"
	"github.com/emptydir-guard/emptydir-guard/test/monitoring"
)

// loadPhase is one burst of TestLoadExactlyOnce.
type loadPhase struct {
	name        string
	over, under int // pods over and under their volume's sizeLimit
	maxEvict    int // --eviction.max-global (global cap); 0: none
	ports       int // first of this phase's loopback ports
}

// wantEvictions is how many pods the phase must evict: every pod over its limit, or
// exactly the cap when the cap is smaller.
func (p loadPhase) wantEvictions() int {
	if p.maxEvict > 0 && p.maxEvict < p.over {
		return p.maxEvict
	}
	return p.over
}

// loadResult is what one phase measured.
type loadResult struct {
	phase                 loadPhase
	replicas, ams         int
	deliveries            int
	evicted, apiEvictions int // pods terminating; Eviction requests the API server counted
	throttled             int // of them, refused by API Priority and Fairness (429) and retried
	wrong                 int // pods under their limit that were evicted
	seconds               float64
	p50, p99              time.Duration
	peakRSS               int64
	apiPerEviction        float64
	ledgerPerEviction     float64
}

const (
	loadLimit      = 64 << 10  // every volume's sizeLimit
	loadOverBytes  = 128 << 10 // written into a volume over its limit
	loadUnderBytes = 16 << 10  // written into a volume under its limit
	loadReplicas   = 3
)

// TestLoadExactlyOnce: a burst of EmptyDirOverLimit alerts for hundreds of pods, pushed (as
// Prometheus does) into two clustered Alertmanagers that both deliver every notification
// (--cluster.peer-timeout=0: HA's duplicates, every time), each to a different replica of
// three leader-elected remediator processes (standbys forward to the leader), on the real API
// server. The pods are bound to a Node without kubelet whose volume directories the test fills
// and a real exporter measures. Asserted: every pod over its limit is evicted exactly once
// (the API server's own count of Eviction requests, the pods' deletion marks, the ledger and
// every answer agree), no pod under its limit is touched, and a global cap smaller than the
// number of pods over their limit evicts exactly that many. Figures (throughput, webhook
// latency as Alertmanager sees it, peak RSS, API requests per eviction) are reported, not
// asserted, in docs/reliability.md section "load".
func TestLoadExactlyOnce(t *testing.T) {
	exporterBin, remediatorBin := testbin.Path(t, "emptydir-exporter"), testbin.Path(t, "emptydir-remediator")
	c := sharedCluster(t)
	ctx, cancel := context.WithTimeout(rootCtx, 8*time.Minute)
	defer cancel()

	// The test plays kubelet for hundreds of pods: a client faster than the cluster's default.
	client := fastClient(t, c, 500, 1000)
	nodeName := "load-" + framework.RandSuffix()
	node, err := cluster.NewFakeNode(ctx, client, nodeName, filepath.Join(c.WorkDir(), "fakenodes", nodeName))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		dctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := node.Delete(dctx); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	const exporterAddr = "127.0.0.1:19800"
	framework.StartInNetns(t, c, "exporter-"+nodeName, exporterBin, "--node.name="+node.Name(), "--kubeconfig="+c.KubeconfigPath(),
		"--kubelet.root-dir="+node.RootDir(), "--collection.source=filesystem", "--collection.interval=30s", "--web.listen-address="+exporterAddr)
	framework.Eventually(t, 60*time.Second, 500*time.Millisecond, "exporter ready", func() (bool, string) {
		return strings.HasPrefix(readyState(c, exporterAddr), "200"), readyState(c, exporterAddr)
	})
	const token = "e2e-load-webhook-token-0123456789abcd" // the remediator wants >= 32 bytes
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	phases := []loadPhase{
		{name: "every pod over its limit, no cap", over: 500, under: 100, ports: 19810},
		{name: "global cap smaller than the pods over their limit", over: 120, under: 30, maxEvict: 40, ports: 19850},
	}
	var results []loadResult
	for _, ph := range phases {
		t.Run(ph.name, func(t *testing.T) {
			results = append(results, runLoadPhase(ctx, t, c, client, node, ph, remediatorBin, exporterAddr, tokenFile, token))
		})
	}
	if t.Failed() || len(results) != len(phases) {
		return
	}
	framework.RecordDoc(t, "docs/reliability.md", "load", "TestLoadExactlyOnce", loadTable(results))
}

func runLoadPhase(ctx context.Context, t *testing.T, c *cluster.Cluster, client kubernetes.Interface, node *cluster.FakeNode,
	ph loadPhase, remediatorBin, exporterAddr, tokenFile, token string) loadResult {
	ns := framework.Namespace(ctx, t, c, "load")
	lease := "load"

	// The replicas' pods, so that a standby finds the leader (PodLeaderResolver): bound to
	// the fake node, with the replica's loopback address as pod IP.
	var ports []int
	for i := range loadReplicas {
		port := ph.ports + i
		ports = append(ports, port)
		p := node.Pod(ns, fmt.Sprintf("%s-%c", lease, 'a'+i))
		p.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: int32(port)}}
		running, err := node.RunPod(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		running.Status.PodIP, running.Status.PodIPs = "127.0.0.1", []corev1.PodIP{{IP: "127.0.0.1"}}
		if _, err := client.CoreV1().Pods(ns).UpdateStatus(ctx, running, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// The workload: pods over and under their limit, their volumes filled.
	type workload struct {
		pod  *corev1.Pod
		over bool
	}
	pods := make([]workload, ph.over+ph.under)
	var g errgroup.Group
	g.SetLimit(16)
	for i := range pods {
		over := i < ph.over
		g.Go(func() error {
			p := node.Pod(ns, fmt.Sprintf("w-%04d", i), "data")
			p.Spec.Volumes[0].EmptyDir.SizeLimit = resource.NewQuantity(loadLimit, resource.BinarySI)
			running, err := node.RunPod(ctx, p)
			if err != nil {
				return err
			}
			size := int64(loadUnderBytes)
			if over {
				size = loadOverBytes
			}
			if err := node.Fill(running, "data", 1, size); err != nil {
				return err
			}
			pods[i] = workload{pod: running, over: over}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}

	leader, reps := startReplicaSet(t, c, remediatorBin, ns, lease, ports,
		"--kubeconfig="+c.KubeconfigPath(), "--exporter.url=http://"+exporterAddr, "--web.bearer-token-file="+tokenFile,
		"--policy.namespace-allow="+ns, "--kube-api.qps=100", "--kube-api.burst=200",
		"--eviction.max-global="+strconv.Itoa(ph.maxEvict), "--eviction.max-per-node=0", "--eviction.max-per-namespace=0")
	framework.Eventually(t, 30*time.Second, 200*time.Millisecond, "every replica knows the leader", func() (bool, string) {
		var states []string
		for _, r := range reps {
			s := readyState(c, r.addr)
			if !strings.HasPrefix(s, "200") {
				return false, r.name + ": " + s
			}
			states = append(states, s)
		}
		return true, strings.Join(states, ", ")
	})

	// Alertmanager i delivers to replica i (one of them may be the leader) through a recorder
	// that times each delivery as Alertmanager sees it.
	var recs []*framework.WebhookRecorder
	var hooks []string
	for i := range 2 {
		addr := fmt.Sprintf("127.0.0.1:%d", ph.ports+10+i)
		rec, err := framework.NewWebhookRecorder(c, addr, "http://"+reps[i].addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(rec.Close)
		recs, hooks = append(recs, rec), append(hooks, "http://"+addr+"/webhook")
	}
	ams, err := monitoring.StartHAAlertmanagers(ctx, c, monitoring.HAAlertmanagerOptions{
		WebhookURLs: hooks, WebhookToken: token, AlertmanagerConfig: "../../deploy/alertmanager/alertmanager.yml",
		GroupWait: time.Second, GroupInterval: 30 * time.Second, RepeatInterval: 10 * time.Minute,
		BasePort: ph.ports + 20,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ams.Stop)

	alerts := make([]monitoring.PostableAlert, 0, len(pods))
	for _, w := range pods {
		alerts = append(alerts, monitoring.PostableAlert{StartsAt: time.Now(), Labels: map[string]string{
			"alertname": "EmptyDirOverLimit", "severity": "critical", "remediation": "evict",
			"namespace": ns, "pod": w.pod.Name, "uid": string(w.pod.UID), "volume": "data", "node": node.Name()}})
	}
	before := apiServerRequests(ctx, t, c)
	if err := ams.PostAlerts(ctx, alerts, 200); err != nil {
		t.Fatal(err)
	}

	// Done when each Alertmanager has delivered every alert successfully (200) at least once.
	framework.Eventually(t, 4*time.Minute, time.Second, "every alert delivered by both Alertmanagers", func() (bool, string) {
		var missing []string
		for i, rec := range recs {
			answered := map[string]bool{}
			for _, d := range rec.All() {
				if d.Code == 200 {
					for _, a := range d.Payload.Alerts {
						answered[a.Labels["uid"]] = true
					}
				}
			}
			if n := len(pods) - len(answered); n > 0 {
				missing = append(missing, fmt.Sprintf("alertmanager-%d: %d alerts not yet delivered", i, n))
			}
		}
		return len(missing) == 0, strings.Join(missing, "; ")
	})
	after := apiServerRequests(ctx, t, c)

	res := loadResult{phase: ph, replicas: len(reps), ams: len(ams.Addrs)}
	want := ph.wantEvictions()

	// 1. The API server's own count of Eviction requests: exactly one per evicted pod.
	delta := func(pred func(apiRequest) bool) int {
		n := 0.0
		for k, v := range after {
			if pred(k) {
				n += v - before[k]
			}
		}
		return int(n)
	}
	isEviction := func(k apiRequest) bool { return k.resource == "pods" && k.subresource == "eviction" }
	res.apiEvictions = delta(isEviction)
	// A 429 without a budget is API Priority and Fairness refusing the request before the
	// Eviction handler ran (no PodDisruptionBudget exists here): nothing was evicted, the
	// remediator answers "throttled" and Alertmanager retries. Every other request must be one
	// eviction carried out, exactly once per pod.
	codes := map[string]int{}
	for k, v := range after {
		if isEviction(k) {
			codes[k.code] += int(v - before[k])
		}
	}
	ok := 0
	for code, n := range codes {
		switch {
		case strings.HasPrefix(code, "2"):
			ok += n
		case code == "429" || n == 0:
		default:
			t.Errorf("the API server answered %d Eviction requests with %s (by code %v)", n, code, codes)
		}
	}
	if ok != want {
		t.Errorf("the API server counted %d successful Eviction requests (by code %v), want exactly %d", ok, codes, want)
	}
	res.throttled = codes["429"]
	if evs := delta(func(k apiRequest) bool { return k.resource != "" }); want > 0 {
		res.apiPerEviction = float64(evs) / float64(want)
		res.ledgerPerEviction = float64(delta(func(k apiRequest) bool { return k.resource == "configmaps" })) / float64(want)
	}

	// 2. The pods: over their limit evicted (terminating: no kubelet ends them), under untouched.
	overEvicted := 0
	for _, w := range pods {
		p, err := client.CoreV1().Pods(ns).Get(ctx, w.pod.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("pod %s: %v", w.pod.Name, err)
		}
		switch {
		case p.DeletionTimestamp != nil && w.over:
			overEvicted++
		case p.DeletionTimestamp != nil:
			res.wrong++
			t.Errorf("pod %s under its limit was evicted", p.Name)
		}
	}
	res.evicted = overEvicted + res.wrong
	if overEvicted != want {
		t.Errorf("%d pods over their limit evicted, want %d", overEvicted, want)
	}

	// 3. The remediators' own records agree: their counters, their ledger, their answers.
	var evictedCounter float64
	for _, r := range reps {
		fams, err := framework.Scrape(ctx, c, "http://"+r.addr+"/metrics")
		if err != nil {
			t.Fatal(err)
		}
		v, _ := framework.Sample(fams, "emptydir_remediator_evictions_total", map[string]string{"result": "evicted"})
		evictedCounter += v
	}
	if int(evictedCounter) != want {
		t.Errorf("remediators counted %g evictions, want %d", evictedCounter, want)
	}
	ledger := ledgerEntries(ctx, t, c, ns, lease+"-ledger")
	if n := countValues(ledger, string(remediator.OutcomeEvicted)); n != want {
		t.Errorf("ledger records %d evicted UIDs, want %d", n, want)
	}
	evictedAnswers := map[string]int{}
	deliveryCodes := map[int]int{}
	retriedOutcomes := map[remediator.Outcome]int{} // the outcomes a non-200 answer carried
	var latencies []time.Duration
	var first, last time.Time
	for _, rec := range recs {
		for _, d := range rec.All() {
			res.deliveries++
			deliveryCodes[d.Code]++
			if d.Code != 200 {
				for _, a := range d.Response.Alerts {
					retriedOutcomes[a.Outcome]++
				}
			}
			latencies = append(latencies, d.Answered.Sub(d.Received))
			if first.IsZero() || d.Received.Before(first) {
				first = d.Received
			}
			if d.Answered.After(last) {
				last = d.Answered
			}
			for _, a := range d.Response.Alerts {
				if a.Outcome == remediator.OutcomeEvicted {
					evictedAnswers[a.Target.UID]++
				}
			}
		}
	}
	for uid, n := range evictedAnswers {
		if n != 1 {
			t.Errorf("uid %s answered evicted %d times", uid, n)
		}
	}
	if len(evictedAnswers) != want {
		t.Errorf("%d UIDs answered evicted, want %d", len(evictedAnswers), want)
	}
	if res.deliveries < 2*len(pods) {
		t.Errorf("%d deliveries for %d alerts from 2 Alertmanagers: the duplicates did not happen", res.deliveries, len(pods))
	}

	slices.Sort(latencies)
	res.p50, res.p99 = latencies[len(latencies)/2], latencies[len(latencies)*99/100]
	res.seconds = last.Sub(first).Seconds()
	for _, r := range reps {
		if rss := peakRSS(r.cmd.Process.Pid); rss > res.peakRSS {
			res.peakRSS = rss
		}
	}
	t.Logf("%s: leader %s; %d alerts, %d deliveries (by HTTP status %v; outcomes answered with other than 200 %v) in %.1fs (%.0f/s), p50 %s p99 %s; %d evicted (API server: %d Eviction requests, %d of them throttled), %d wrong; peak RSS %d MiB; %.1f API requests (%.1f ConfigMap) per eviction",
		ph.name, leader.name, len(pods), res.deliveries, deliveryCodes, retriedOutcomes, res.seconds, float64(res.deliveries)/res.seconds, res.p50, res.p99,
		res.evicted, res.apiEvictions, res.throttled, res.wrong, res.peakRSS>>20, res.apiPerEviction, res.ledgerPerEviction)
	return res
}

func countValues(m map[string]string, v string) int {
	n := 0
	for _, x := range m {
		if x == v {
			n++
		}
	}
	return n
}

// apiRequest is one series of the API server's apiserver_request_total.
type apiRequest struct{ verb, resource, subresource, code string }

// apiServerRequests reads apiserver_request_total from the API server's /metrics: its own
// count of every request it served, independent of any client's.
func apiServerRequests(ctx context.Context, t *testing.T, c *cluster.Cluster) map[apiRequest]float64 {
	t.Helper()
	raw, err := c.Client().CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Fatalf("API server metrics: %v", err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("API server metrics: %v", err)
	}
	out := map[apiRequest]float64{}
	for _, m := range fams["apiserver_request_total"].GetMetric() {
		out[apiRequestOf(m)] += m.GetCounter().GetValue()
	}
	return out
}

func apiRequestOf(m *dto.Metric) apiRequest {
	var k apiRequest
	for _, l := range m.GetLabel() {
		switch l.GetName() {
		case "verb":
			k.verb = l.GetValue()
		case "resource":
			k.resource = l.GetValue()
		case "subresource":
			k.subresource = l.GetValue()
		case "code":
			k.code = l.GetValue()
		}
	}
	return k
}

// peakRSS is the peak resident set size (VmHWM) of process pid, in bytes; 0 if unknown.
func peakRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kib, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err == nil {
				return kib << 10
			}
		}
	}
	return 0
}

// loadTable renders the results as the Markdown table of docs/reliability.md.
func loadTable(results []loadResult) string {
	var b strings.Builder
	b.WriteString("| run | pods over / under limit | global cap | replicas, Alertmanagers | deliveries | evictions expected / API server count / wrong | deliveries/s | webhook latency p50 / p99 | remediator peak RSS | API requests per eviction (ledger ConfigMap) |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, r := range results {
		globalCap := "none"
		if r.phase.maxEvict > 0 {
			globalCap = strconv.Itoa(r.phase.maxEvict)
		}
		fmt.Fprintf(&b, "| %s | %d / %d | %s | %d, %d | %d | %d / %d / %d | %.0f | %s / %s | %d MiB | %.1f (%.1f) |\n",
			r.phase.name, r.phase.over, r.phase.under, globalCap, r.replicas, r.ams, r.deliveries,
			r.phase.wantEvictions(), r.apiEvictions, r.wrong, float64(r.deliveries)/r.seconds,
			r.p50.Round(time.Millisecond), r.p99.Round(time.Millisecond), r.peakRSS>>20, r.apiPerEviction, r.ledgerPerEviction)
	}
	return b.String()
}
