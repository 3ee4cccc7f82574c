package remediator

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/emptydir-guard/emptydir-guard/internal/liveapi"
)

// What one eviction may cost in API requests, by design (docs/remediator.md): the exporter pod
// LIST of its live measurement (PodLocator), the pod GET, the Eviction, its Event and the two
// ledger writes (reserve, commit; fewer when batched, no read: the ledger is watched). A pod
// skipped for a cap costs per copy delivered a pod GET, and once the LIST (the second copy
// reuses the measurement) and at most three Event requests (the CREATE, the second copy's
// series PATCH and, when that overtakes the CREATE, its CREATE fallback: client-go
// tools/events): 6 for two copies. A delivery the ledger answers `duplicate` costs none.
const (
	stormRequestsPerEviction = 6
	stormRequestsPerCapSkip  = 3
)

// A DaemonSet rollout whose pods all overfill their emptyDirs at once: every node's pod is
// over its limit, both HA Alertmanagers deliver every pod's alert, 32 deliveries in flight.
// The caps must hold under that concurrency, no pod is evicted twice, the API requests stay
// within the design's per-eviction bound, every answer beats Alertmanager's timeout, and the
// ledger stays within its bounds. The figures are in docs/reliability.md, "Fleet-wide storm".
func TestFleetStorm(t *testing.T) {
	nodes := 300
	if testing.Short() {
		nodes = 60
	}
	const copies, parallel = 2, 32
	route := readShippedRoute(t)
	if !slices.Contains(route.groupBy, LabelUID) || !slices.Contains(route.groupBy, LabelVolume) {
		t.Fatalf("the shipped route groups by %v: not one alert per group", route.groupBy)
	}
	fleet := newStormFleet(t, nodes)
	window := DefaultConfig().Caps.Window
	runs := []struct {
		name string
		caps Caps
		// binding is the skip reason of the pods beyond the caps: one namespace, one pod
		// per node.
		binding string
	}{
		{"default caps", DefaultConfig().Caps, SkipCapNamespace},
		// The namespace cap lifted, so that the global cap binds.
		{"global cap", Caps{PerNode: 5, Global: 2 * nodes / 3, Window: window}, SkipCapGlobal},
		{"no caps", Caps{}, ""},
	}
	var rows []stormRow
	for _, run := range runs {
		t.Run(run.name, func(t *testing.T) {
			row := runStorm(t, fleet, route, run.caps, run.binding, copies, parallel)
			row.run = run.name
			rows = append(rows, row)
		})
	}
	t.Logf("fleet-wide storm: %d nodes, one DaemonSet pod over its limit on each, every alert delivered %d times, %d in flight, webhook timeout %s",
		nodes, copies, parallel, route.timeout)
	t.Log("| run | nodes | pods | deliveries | evictions | skips by reason | live walks | API requests per eviction (breakdown) | webhook latency p50 / p99 / max | ledger entries, bytes |")
	for _, r := range rows {
		t.Log(r)
	}
}

// stormRow is one run's line of the table.
type stormRow struct {
	run                    string
	nodes, pods            int
	deliveries, evictions  int
	skips                  map[string]int
	walks                  int64
	requests               map[string]int
	total                  int
	p50, p99, max          time.Duration
	ledgerEntries, ledgerB int
}

func (r stormRow) String() string {
	var skips, reqs []string
	for _, k := range slices.Sorted(maps.Keys(r.skips)) {
		skips = append(skips, fmt.Sprintf("%s %d", k, r.skips[k]))
	}
	for _, k := range slices.Sorted(maps.Keys(r.requests)) {
		reqs = append(reqs, fmt.Sprintf("%s %d", k, r.requests[k]))
	}
	return fmt.Sprintf("| %s | %d | %d | %d | %d | %s | %d | %.2f (%d: %s) | %s / %s / %s | %d, %d B |",
		r.run, r.nodes, r.pods, r.deliveries, r.evictions, strings.Join(skips, ", "), r.walks,
		float64(r.total)/float64(max(r.evictions, 1)), r.total, strings.Join(reqs, ", "),
		r.p50.Round(time.Millisecond), r.p99.Round(time.Millisecond), r.max.Round(time.Millisecond), r.ledgerEntries, r.ledgerB)
}

// runStorm delivers the storm to a remediator built as the command builds it (exporter
// measurer with PodLocator, ledger ConfigMap, Event recorder on the clientset, bearer token)
// with caps, and checks what came of it. binding is the skip reason of the pods beyond the
// caps ("": none are).
func runStorm(t *testing.T, fleet *stormFleet, route shippedRoute, caps Caps, binding string, copies, parallel int) stormRow {
	client := fake.NewClientset(fleet.objects()...)
	withResourceVersions(client)
	client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		return evictionSimulator(client)(a)
	})
	client.PrependReactor("list", "pods", fleet.listByNode)

	exporter := &stormExporter{fleet: fleet}
	exp := httptest.NewServer(exporter.handler())
	defer exp.Close()
	tr := podIPTransport(exp.Listener.Addr().String())
	defer tr.CloseIdleConnections()
	measurer := NewExporterMeasurer(&http.Client{Transport: tr, Timeout: stormMeasureTimeout}, PodLocator{
		Client: client, Namespace: stormGuardNamespace, Selector: stormExporterSelector, Scheme: "http", Port: liveapi.DefaultPort})

	cfg := DefaultConfig()
	cfg.Caps, cfg.BearerToken = caps, stormToken
	srv, err := New(cfg, client, measurer, WithLedgerConfigMap(stormGuardNamespace, stormLedgerConfigMap))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	waitFor(t, "the ledger watch to sync", srv.ledgerStore.(*configMapStore).informer.HasSynced)
	hook := httptest.NewServer(srv.Handler())
	defer hook.Close()

	client.ClearActions() // the ledger watch's LIST and WATCH: once per process, not per eviction
	answers := route.deliver(t, hook.URL+cfg.WebhookPath, fleet.pods, copies, parallel)
	actions := settledActions(t, client)

	row := stormRow{nodes: len(fleet.nodes), pods: len(fleet.pods), deliveries: len(answers), skips: map[string]int{},
		requests: map[string]int{}, walks: exporter.walks.Load()}

	// Answers: every delivery answered 200 (nothing to retry) about its own pod, in time.
	latencies := make([]time.Duration, 0, len(answers))
	evictedAnswers := map[string]int{}
	reasonsOf := map[string][]string{}
	for _, a := range answers {
		latencies = append(latencies, a.latency)
		uid := string(a.pod.UID)
		if a.err != nil || a.code != http.StatusOK || len(a.resp.Alerts) != 1 || a.resp.Alerts[0].Target.UID != uid {
			t.Errorf("delivery for %s: code %d, err %v, answer %+v", a.pod.Name, a.code, a.err, a.resp)
			continue
		}
		res := a.resp.Alerts[0]
		switch res.Outcome {
		case OutcomeEvicted:
			evictedAnswers[uid]++
		case OutcomeSkipped:
			row.skips[res.Reason]++
			reasonsOf[uid] = append(reasonsOf[uid], res.Reason)
		default:
			t.Errorf("delivery for %s: %s/%s: %s", a.pod.Name, res.Outcome, res.Reason, res.Message)
		}
	}
	slices.Sort(latencies)
	row.p50, row.p99, row.max = quantile(latencies, 0.5), quantile(latencies, 0.99), latencies[len(latencies)-1]
	if row.max >= route.timeout {
		t.Errorf("slowest answer took %s (p99 %s): Alertmanager's webhook timeout is %s", row.max, row.p99, route.timeout)
	}

	// (1), (2): the Eviction requests the API server received, against the caps and per UID.
	evictionsOf, perNode, perNS := map[string]int{}, map[string]int{}, map[string]int{}
	for _, a := range actions {
		row.requests[requestKey(a)]++
		if requestKey(a) != "create pods/eviction" {
			continue
		}
		ev := a.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction)
		uid := string(*ev.DeleteOptions.Preconditions.UID)
		evictionsOf[uid]++
		perNode[fleet.byUID[uid].Spec.NodeName]++
		perNS[ev.Namespace]++
		row.evictions++
	}
	row.total = len(actions)
	want := len(fleet.pods)
	for _, c := range []int{caps.PerNamespace, caps.Global} {
		if c > 0 {
			want = min(want, c)
		}
	}
	if row.evictions != want {
		t.Errorf("%d Eviction requests, want %d (every pod over its limit, caps %+v)", row.evictions, want, caps)
	}
	checkCap := func(what string, counts map[string]int, limit int) {
		for k, n := range counts {
			if limit > 0 && n > limit {
				t.Errorf("%d evictions on %s %s: over the cap of %d", n, what, k, limit)
			}
		}
	}
	checkCap("node", perNode, caps.PerNode)
	checkCap("namespace", perNS, caps.PerNamespace)
	checkCap("the cluster", map[string]int{"": row.evictions}, caps.Global)
	for _, p := range fleet.pods {
		uid := string(p.UID)
		switch {
		case evictionsOf[uid] > 1 || evictedAnswers[uid] > 1:
			t.Errorf("pod %s (uid %s) evicted %d times, answered evicted %d times", p.Name, uid, evictionsOf[uid], evictedAnswers[uid])
		case evictionsOf[uid] != evictedAnswers[uid]:
			t.Errorf("pod %s: %d Eviction requests, %d evicted answers", p.Name, evictionsOf[uid], evictedAnswers[uid])
		case evictionsOf[uid] == 1:
			if got := reasonsOf[uid]; len(got) != copies-1 || slices.ContainsFunc(got, func(r string) bool { return r != SkipDuplicate }) {
				t.Errorf("pod %s evicted; its other deliveries answered %q, want %s", p.Name, got, SkipDuplicate)
			}
		default:
			if got := reasonsOf[uid]; len(got) != copies || slices.ContainsFunc(got, func(r string) bool { return r != binding }) {
				t.Errorf("pod %s not evicted; its deliveries answered %q, want %s", p.Name, got, binding)
			}
		}
	}

	// (3) API requests: each kind within the design's count, and in all within the bound.
	capSkips := row.deliveries - row.evictions - row.skips[SkipDuplicate]
	skippedPods := len(fleet.pods) - row.evictions
	if row.walks > int64(len(fleet.pods)) {
		t.Errorf("%d live measurements of %d pods: the second copy should reuse the first's", row.walks, len(fleet.pods))
	}
	perKind := []struct {
		kinds []string
		limit int
	}{
		{[]string{"list pods"}, len(fleet.pods)}, // PodLocator, one per live measurement
		{[]string{"get pods"}, row.evictions + capSkips},
		{[]string{"create events", "patch events"}, row.evictions + capSkips + skippedPods},
		{[]string{"get configmaps"}, 0}, // the ledger is read from its watch
		{[]string{"create configmaps", "update configmaps"}, 2 * row.evictions},
	}
	for _, k := range perKind {
		n := 0
		for _, kind := range k.kinds {
			n += row.requests[kind]
		}
		if n > k.limit {
			t.Errorf("%d requests %s, want at most %d (%d evictions, %d cap skips)", n, strings.Join(k.kinds, "+"), k.limit, row.evictions, capSkips)
		}
	}
	if bound := stormRequestsPerEviction*row.evictions + stormRequestsPerCapSkip*capSkips; row.total > bound {
		t.Errorf("%d API requests for %d evictions and %d cap skips, want at most %d: %v", row.total, row.evictions, capSkips, bound, row.requests)
	}

	// (5) The ledger: exactly the evictions, committed, within its bounds; and the bound on
	// entries keeps even the longest names under a ConfigMap's 1 MiB.
	st, size := storedLedger(t, client)
	row.ledgerEntries, row.ledgerB = len(st.Entries), size
	if len(st.Entries) != row.evictions || len(st.Entries) > MaxLedgerEntries {
		t.Errorf("ledger holds %d entries for %d evictions (at most %d)", len(st.Entries), row.evictions, MaxLedgerEntries)
	}
	for _, e := range st.Entries {
		if e.Outcome != OutcomeEvicted || evictionsOf[e.UID] != 1 {
			t.Errorf("ledger entry %+v: want %s, of a pod evicted once", e, OutcomeEvicted)
		}
	}
	if size > maxConfigMapBytes || worstLedgerBytes(t) > maxConfigMapBytes {
		t.Errorf("ledger.json is %d bytes (%d at %d entries of the longest names): a ConfigMap holds %d", size, worstLedgerBytes(t), MaxLedgerEntries, maxConfigMapBytes)
	}
	return row
}

// maxConfigMapBytes is what the API server lets a ConfigMap's data hold.
const maxConfigMapBytes = 1 << 20

// worstLedgerBytes is the size of a ledger at MaxLedgerEntries entries of the longest node
// name (253) and namespace (63), the longest outcome and a time with nanoseconds and a zone.
func worstLedgerBytes(t *testing.T) int {
	t.Helper()
	e := ledgerEntry{ID: newEntryID(), At: time.Date(2026, 12, 31, 23, 59, 59, 999999999, time.FixedZone("", -9*3600-30*60)),
		UID: testUID("x"), Node: strings.Repeat("n", 253), Namespace: strings.Repeat("s", 63), Outcome: outcomeUnconfirmed}
	b, err := json.Marshal(ledgerState{Entries: slices.Repeat([]ledgerEntry{e}, MaxLedgerEntries)})
	if err != nil {
		t.Fatal(err)
	}
	return len(b)
}
