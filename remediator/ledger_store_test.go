package remediator

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// withResourceVersions makes the fake clientset's ConfigMaps behave as the API server's do:
// every write gets a new resourceVersion, and an update carrying another one than the
// stored object's fails with Conflict. (The fake tracker alone does neither.)
func withResourceVersions(client *fake.Clientset) {
	gvr := corev1.SchemeGroupVersion.WithResource("configmaps")
	var mu sync.Mutex
	rv := 0
	next := func() string { mu.Lock(); defer mu.Unlock(); rv++; return strconv.Itoa(rv) }
	client.PrependReactor("create", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		cm := a.(k8stesting.CreateAction).GetObject().(*corev1.ConfigMap).DeepCopy()
		cm.ResourceVersion = next()
		if err := client.Tracker().Create(gvr, cm, cm.Namespace); err != nil {
			return true, nil, err
		}
		return true, cm, nil
	})
	client.PrependReactor("update", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		cm := a.(k8stesting.UpdateAction).GetObject().(*corev1.ConfigMap).DeepCopy()
		cur, err := client.Tracker().Get(gvr, cm.Namespace, cm.Name)
		if err != nil {
			return true, nil, err
		}
		if have := cur.(*corev1.ConfigMap).ResourceVersion; have != cm.ResourceVersion {
			return true, nil, apierrors.NewConflict(configMapsResource, cm.Name, fmt.Errorf("resourceVersion %s is not the current %s", cm.ResourceVersion, have))
		}
		cm.ResourceVersion = next()
		if err := client.Tracker().Update(gvr, cm, cm.Namespace); err != nil {
			return true, nil, err
		}
		return true, cm, nil
	})
}

// startedStore returns a ConfigMap store whose watch has synced, and the function that
// stops the watch (freezing its cache).
func startedStore(t *testing.T, client *fake.Clientset) (*configMapStore, func()) {
	t.Helper()
	s := &configMapStore{client: client, namespace: "emptydir-guard", name: "ledger"}
	stop := make(chan struct{})
	s.start(stop)
	var once sync.Once
	freeze := func() { once.Do(func() { close(stop) }) }
	t.Cleanup(freeze)
	waitFor(t, "the ledger watch to sync", func() bool { return s.informer.HasSynced() })
	return s, freeze
}

// countActions returns the fake clientset's requests as "verb resource[/subresource]" → count.
func countActions(client *fake.Clientset) map[string]int {
	n := map[string]int{}
	for _, a := range client.Actions() {
		if a.GetVerb() == "list" || a.GetVerb() == "watch" {
			continue // the informer's one LIST and WATCH, not per eviction
		}
		k := a.GetVerb() + " " + a.GetResource().Resource
		if a.GetSubresource() != "" {
			k += "/" + a.GetSubresource()
		}
		n[k]++
	}
	return n
}

// With the watch synced, deciding and recording evictions reads nothing from the API
// server: each eviction costs exactly its two guarded writes (reserve, commit). Before the
// cache, every read was a GET: three per eviction.
func TestLedgerReadsFromWatchCache(t *testing.T) {
	client := fake.NewClientset()
	withResourceVersions(client)
	store, _ := startedStore(t, client)
	l := newLedger(store, time.Minute, time.Hour)
	ctx := t.Context()
	const evictions = 20
	client.ClearActions()
	for i := range evictions {
		uid := fmt.Sprintf("uid-%d", i)
		at := testNow.Add(time.Duration(i) * time.Second)
		if _, ok, err := l.last(ctx, uid); err != nil || ok {
			t.Fatalf("last(%s): %v %v", uid, ok, err)
		}
		r, why, _, err := l.reserve(ctx, uid, "n1", "ns", at, Caps{Global: evictions, Window: time.Hour})
		if err != nil || why != "" {
			t.Fatalf("reserve %s: %q %v", uid, why, err)
		}
		if err := r.commit(ctx, OutcomeEvicted, at); err != nil {
			t.Fatal(err)
		}
	}
	got := countActions(client)
	if got["get configmaps"] != 0 {
		t.Errorf("%d GETs of the ledger for %d evictions, want 0: reads come from the watch", got["get configmaps"], evictions)
	}
	if w := got["create configmaps"] + got["update configmaps"]; w != 2*evictions {
		t.Errorf("%d ledger writes for %d evictions, want 2 each: %v", w, evictions, got)
	}
	if n := len(ledgerCM(t, client)); n != evictions {
		t.Errorf("%d entries stored, want %d", n, evictions)
	}
}

// A replica whose watch lags (here: stopped, its cache frozen before another replica's
// eviction) decides on an outdated copy; its write carries that copy's resourceVersion, the
// API server refuses it, the retry reads the current copy with a GET, and the decision is
// redone on it: no second eviction of a UID, no eviction over the cap.
func TestLedgerStaleCacheNeverEvictsTwice(t *testing.T) {
	tests := []struct {
		name, uid string
		caps      Caps
		want      string
	}{
		{name: "same pod", uid: "uid-x", want: SkipDuplicate},
		{name: "another pod over the cap", uid: "uid-y", caps: Caps{Global: 2, Window: time.Hour}, want: SkipCapGlobal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			client := fake.NewClientset()
			withResourceVersions(client)
			storeA, _ := startedStore(t, client)
			a := newLedger(storeA, 0, time.Hour)
			r, _, _, err := a.reserve(ctx, "uid-seed", "n1", "ns", testNow, Caps{})
			if err != nil {
				t.Fatal(err)
			}
			if err := r.commit(ctx, OutcomeEvicted, testNow); err != nil {
				t.Fatal(err)
			}
			storeB, freezeB := startedStore(t, client)
			waitFor(t, "replica B to see the seed", func() bool {
				_, ok, _ := storeB.informer.GetStore().GetByKey(storeB.key())
				return ok
			})
			var ops []string
			storeB.observe = func(op, result string) { ops = append(ops, op+"/"+result) }
			freezeB()
			b := newLedger(storeB, 0, time.Hour)

			// A evicts uid-x; B's cache does not know.
			r, why, _, err := a.reserve(ctx, "uid-x", "n1", "ns", testNow.Add(time.Second), tt.caps)
			if err != nil || why != "" {
				t.Fatalf("A: %q %v", why, err)
			}
			if err := r.commit(ctx, OutcomeEvicted, testNow.Add(time.Second)); err != nil {
				t.Fatal(err)
			}
			if _, ok, _ := b.last(ctx, "uid-x"); ok {
				t.Fatal("B's cache is not stale: the test proves nothing")
			}
			slot, why, _, err := b.reserve(ctx, tt.uid, "n1", "ns", testNow.Add(2*time.Second), tt.caps)
			if err != nil || slot != nil || why != tt.want {
				t.Errorf("B on a stale cache: slot %v, %q, %v; want %q", slot, why, err, tt.want)
			}
			want := "cache_read/success cache_read/success write/conflict get/success"
			if got := strings.Join(ops, " "); got != want {
				t.Errorf("B's ledger operations: %s, want %s", got, want)
			}
			if n := len(ledgerCM(t, client)); n != 2 {
				t.Errorf("%d entries stored, want 2 (seed, uid-x)", n)
			}
		})
	}
}

// ledgerReplica is one more Server on e's API server, keeping its ledger in the ConfigMap
// all replicas share; it is closed when the test ends.
func (e *env) ledgerReplica(cfg Config) *Server {
	e.t.Helper()
	s, err := New(cfg, e.client, e.measurer, WithEventRecorder(e.recorder), WithClock(e.clock),
		WithLedgerConfigMap("emptydir-guard", "emptydir-remediator-ledger"))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(s.Close)
	return s
}

// waitLedgerSynced waits until s's watch of the ledger ConfigMap has synced.
func waitLedgerSynced(t *testing.T, s *Server) {
	t.Helper()
	store := s.ledgerStore.(*configMapStore)
	waitFor(t, "the ledger watch to sync", func() bool { return store.informer.HasSynced() })
}

// The ledger's operations are counted by op and result: a replica with a stale cache
// (frozen watch) passes the cached cap check, is refused its write, re-reads with a GET and
// declines over the cap. Three cache reads: the UID's history, the caps before the pod is
// fetched, and the copy the write starts from.
func TestLedgerOperationsMetric(t *testing.T) {
	cfg := testConfig()
	cfg.Caps = Caps{Global: 1, Window: 10 * time.Minute}
	e := newEnv(t, cfg, newPod("default", "web-0", uid1).build(), newPod("default", "web-1", uid2).build())
	withResourceVersions(e.client)
	e.measurer.used[uid1], e.measurer.used[uid2] = 10*mib, 10*mib
	replica := func() *Server {
		s := e.ledgerReplica(cfg)
		waitLedgerSynced(t, s)
		return s
	}
	first, second := replica(), replica()
	second.Close() // its watch stops: its cache never sees the first one's eviction
	if res := first.handleAlert(t.Context(), 0, firing("default", "web-0", uid1)); res.Outcome != OutcomeEvicted {
		t.Fatalf("first replica: %+v, want evicted", res)
	}
	res := second.handleAlert(t.Context(), 0, firing("default", "web-1", uid2))
	if res.Outcome != OutcomeSkipped || res.Reason != SkipCapGlobal {
		t.Fatalf("second replica: %s/%s %q, want skipped/cap_global", res.Outcome, res.Reason, res.Message)
	}
	const want = `
# HELP emptydir_remediator_ledger_operations_total Operations on the eviction ledger ConfigMap, by op and result.
# TYPE emptydir_remediator_ledger_operations_total counter
emptydir_remediator_ledger_operations_total{op="cache_read",result="error"} 0
emptydir_remediator_ledger_operations_total{op="cache_read",result="success"} 3
emptydir_remediator_ledger_operations_total{op="get",result="error"} 0
emptydir_remediator_ledger_operations_total{op="get",result="success"} 1
emptydir_remediator_ledger_operations_total{op="write",result="conflict"} 1
emptydir_remediator_ledger_operations_total{op="write",result="error"} 0
emptydir_remediator_ledger_operations_total{op="write",result="success"} 0
`
	if err := testutil.CollectAndCompare(second.Registry(), strings.NewReader(want), "emptydir_remediator_ledger_operations_total"); err != nil {
		t.Error(err)
	}
	if n := e.evictions(); n != 1 {
		t.Errorf("%d evictions, want 1", n)
	}
}

// What one eviction costs in API requests, ledger included, once the watch has synced: the
// pod GET, the two guarded ledger writes and the Eviction (the Event goes through the
// recorder). Before the cache the ledger added three GETs.
func TestAPIRequestsPerEviction(t *testing.T) {
	const n = 10
	var pods []*corev1.Pod
	for i := range n {
		pods = append(pods, newPod("default", fmt.Sprintf("web-%d", i), testUID(fmt.Sprint(i))).build())
	}
	cfg := testConfig()
	cfg.Caps = Caps{}
	e := newEnv(t, cfg, pods...)
	withResourceVersions(e.client)
	s := e.ledgerReplica(cfg)
	waitLedgerSynced(t, s)
	e.client.ClearActions()
	for _, p := range pods {
		e.measurer.used[string(p.UID)] = 10 * mib
		if res := s.handleAlert(t.Context(), 0, firing("default", p.Name, string(p.UID))); res.Outcome != OutcomeEvicted {
			t.Fatalf("%s: %+v", p.Name, res)
		}
	}
	got := countActions(e.client)
	total := 0
	for _, c := range got {
		total += c
	}
	t.Logf("API requests for %d evictions: %v (%.1f per eviction)", n, got, float64(total)/n)
	want := map[string]int{"get pods": n, "create pods/eviction": n, "create configmaps": 1, "update configmaps": 2*n - 1}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: %d, want %d", k, got[k], w)
		}
	}
	if got["get configmaps"] != 0 {
		t.Errorf("%d ledger GETs, want 0", got["get configmaps"])
	}
}

// The overlay of this replica's own write stands only until the watch has caught up with it.
// A watch that relists (after a 410 Gone, a broken connection) delivers the ConfigMap as it is
// now, which another replica may have written since: the version of the own write never
// arrives. The newer copy must then replace the overlay, or every read until this replica's
// next write (which conflicts) is the stale own copy.
func TestLedgerOverlayEndsWhenTheWatchRelistsPastIt(t *testing.T) {
	client := fake.NewClientset()
	withResourceVersions(client)
	s, freeze := startedStore(t, client)
	ctx := t.Context()
	own := ledgerState{Entries: []ledgerEntry{{ID: "1", At: testNow, UID: "uid-own", Outcome: OutcomeEvicted}}}
	if err := s.save(ctx, own, versionAbsent); err != nil {
		t.Fatal(err)
	}
	// The watch is cut before it delivers the own write; the relist then finds a newer copy.
	freeze()
	cm, err := client.CoreV1().ConfigMaps(s.namespace).Get(ctx, s.name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	newer := cm.DeepCopy()
	newer.Data[ledgerDataKey] = `{"entries":[{"id":"1","at":"2026-12-02T17:00:00Z","uid":"uid-own","outcome":"evicted"},{"id":"2","at":"2026-12-02T17:00:01Z","uid":"uid-other","outcome":"evicted"}]}`
	newer, err = client.CoreV1().ConfigMaps(s.namespace).Update(ctx, newer, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.informer.GetStore().Replace([]any{newer}, newer.ResourceVersion); err != nil {
		t.Fatal(err)
	}
	st, version, err := s.load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if version != newer.ResourceVersion || len(st.Entries) != 2 {
		t.Errorf("read version %s with %d entries, want the relisted %s with 2", version, len(st.Entries), newer.ResourceVersion)
	}
}
