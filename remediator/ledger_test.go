package remediator

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestKeyedMutexSerializesPerKey(t *testing.T) {
	var k keyedMutex
	var inA, maxA atomic.Int32
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			unlock := k.lock("a")
			defer unlock()
			n := inA.Add(1)
			if n > maxA.Load() {
				maxA.Store(n)
			}
			time.Sleep(100 * time.Microsecond)
			inA.Add(-1)
		})
	}
	// Another key is not blocked by "a".
	unlockA := k.lock("a")
	done := make(chan struct{})
	go func() { k.lock("b")(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("key b blocked by key a")
	}
	unlockA()
	wg.Wait()
	if maxA.Load() != 1 {
		t.Errorf("%d holders of key a at once", maxA.Load())
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.m) != 0 {
		t.Errorf("%d keys left behind", len(k.m))
	}
}

func TestLedgerReserveCommitRelease(t *testing.T) {
	ctx := t.Context()
	l := newLedger(&memoryStore{}, 0, time.Hour)
	caps := Caps{Global: 2, Window: time.Hour}
	r1, why, _, err := l.reserve(ctx, "uid-1", "n1", "a", testNow, caps)
	if err != nil || why != "" {
		t.Fatal(why, err)
	}
	r2, why, _, err := l.reserve(ctx, "uid-2", "n2", "b", testNow, caps)
	if err != nil || why != "" {
		t.Fatal(why, err)
	}
	if _, why, _, _ := l.reserve(ctx, "uid-3", "n3", "c", testNow, caps); why != SkipCapGlobal {
		t.Fatalf("third reservation: %q, want cap_global", why)
	}
	if err := r2.release(ctx); err != nil { // the eviction did not happen: the slot is free again
		t.Fatal(err)
	}
	if _, why, _, _ := l.reserve(ctx, "uid-3", "n3", "c", testNow, caps); why != "" {
		t.Fatalf("after release: %q", why)
	}
	if err := r1.commit(ctx, OutcomeEvicted, testNow); err != nil {
		t.Fatal(err)
	}
	if e, ok, err := l.last(ctx, "uid-1"); err != nil || !ok || e.Outcome != OutcomeEvicted {
		t.Fatalf("last = %+v, %v, %v", e, ok, err)
	}
	if _, why, _, _ := l.reserve(ctx, "uid-1", "n9", "z", testNow, Caps{}); why != SkipDuplicate {
		t.Fatalf("evicted uid reserved again: %q, want duplicate", why)
	}
	// Past the horizon, everything is forgotten.
	later := testNow.Add(MinLedgerHorizon + time.Minute)
	if _, why, _, _ := l.reserve(ctx, "uid-4", "n1", "a", later, caps); why != "" {
		t.Fatalf("after the horizon: %q", why)
	}
	if _, ok, _ := l.last(ctx, "uid-1"); ok {
		t.Error("uid remembered past the horizon")
	}
}

// With cooldown and cap window both 0, the duplicate memory still ends (after
// MinLedgerHorizon) and never holds more than MaxLedgerEntries.
func TestLedgerBoundedWithoutCooldownAndWindow(t *testing.T) {
	ctx := t.Context()
	store := &memoryStore{}
	l := newLedger(store, 0, 0)
	for i := range MaxLedgerEntries + 50 {
		r, why, _, err := l.reserve(ctx, fmt.Sprintf("uid-%d", i), "n1", "a", testNow.Add(time.Duration(i)*time.Millisecond), Caps{})
		if err != nil || why != "" {
			t.Fatalf("reservation %d: %q %v", i, why, err)
		}
		if err := r.commit(ctx, OutcomeEvicted, testNow.Add(time.Duration(i)*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(store.st.Entries); n != MaxLedgerEntries {
		t.Errorf("%d entries kept, want at most %d", n, MaxLedgerEntries)
	}
	if _, ok, _ := l.last(ctx, "uid-0"); ok {
		t.Error("the oldest entry was kept beyond MaxLedgerEntries")
	}
	if _, ok, _ := l.last(ctx, fmt.Sprintf("uid-%d", MaxLedgerEntries+49)); !ok {
		t.Error("the newest entry was dropped")
	}
	// One more write after the horizon prunes everything older.
	if _, why, _, err := l.reserve(ctx, "late", "n1", "a", testNow.Add(MinLedgerHorizon+time.Minute), Caps{}); err != nil || why != "" {
		t.Fatal(why, err)
	}
	if n := len(store.st.Entries); n != 1 {
		t.Errorf("%d entries after the horizon, want only the new one", n)
	}
}

// ledgerCM returns the ledger ConfigMap's entries as stored in the fake clientset.
func ledgerCM(t *testing.T, client *fake.Clientset) []ledgerEntry {
	t.Helper()
	cm, err := client.CoreV1().ConfigMaps("emptydir-guard").Get(t.Context(), "ledger", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var st ledgerState
	if err := json.Unmarshal([]byte(cm.Data[ledgerDataKey]), &st); err != nil {
		t.Fatal(err)
	}
	return st.Entries
}

// A replica that restarts, or the standby that takes over, sees the caps, the cooldown and
// the evictions of the one before: they live in the ConfigMap, not in the process.
func TestLedgerConfigMapSharedAcrossReplicas(t *testing.T) {
	ctx := t.Context()
	client := fake.NewClientset()
	newReplica := func() *ledger {
		return newLedger(&configMapStore{client: client, namespace: "emptydir-guard", name: "ledger"}, 10*time.Minute, 10*time.Minute)
	}
	caps := Caps{Global: 2, Window: 10 * time.Minute}
	first := newReplica()
	for _, uid := range []string{"uid-a", "uid-b"} {
		r, why, _, err := first.reserve(ctx, uid, "n1", "ns", testNow, caps)
		if err != nil || why != "" {
			t.Fatalf("%s: %q %v", uid, why, err)
		}
		if err := r.commit(ctx, OutcomeDryRun, testNow); err != nil {
			t.Fatal(err)
		}
	}
	// A crash between the reservation and the commit leaves the slot held.
	if _, why, _, err := newReplica().reserve(ctx, "uid-c", "n1", "ns", testNow, Caps{}); err != nil || why != "" {
		t.Fatal(why, err)
	}

	second := newReplica()
	tests := []struct {
		uid, want string
		at        time.Time
	}{
		{"uid-a", SkipCooldown, testNow.Add(time.Minute)},
		{"uid-c", SkipCooldown, testNow.Add(time.Minute)}, // reserved, outcome unknown: cooldown all the same
		{"uid-d", SkipCapGlobal, testNow.Add(time.Minute)},
		{"uid-d", "", testNow.Add(11 * time.Minute)}, // window and cooldown over
	}
	for _, tc := range tests {
		_, why, _, err := second.reserve(ctx, tc.uid, "n2", "other", tc.at, caps)
		if err != nil || why != tc.want {
			t.Errorf("%s at +%s: %q, %v; want %q", tc.uid, tc.at.Sub(testNow), why, err, tc.want)
		}
	}
	if e, ok, err := second.last(ctx, "uid-b"); err != nil || !ok || e.Outcome != OutcomeDryRun {
		t.Errorf("second replica's last(uid-b) = %+v %v %v", e, ok, err)
	}
	if n := len(ledgerCM(t, client)); n != 4 {
		t.Errorf("%d entries stored, want 4", n)
	}
}

// Two leaders for a moment (a lease handover): the write based on an outdated copy gets
// Conflict, is redone on the fresh copy, and the cap holds.
func TestLedgerConfigMapConflictRereads(t *testing.T) {
	ctx := t.Context()
	client := fake.NewClientset()
	store := &configMapStore{client: client, namespace: "emptydir-guard", name: "ledger"}
	caps := Caps{Global: 1, Window: 10 * time.Minute}
	var conflicts atomic.Int32
	l := newLedger(store, 0, caps.Window)
	// Creates the ConfigMap (no conflict), so the next write is an update.
	if _, why, _, err := l.reserve(ctx, "seed", "n0", "ns0", testNow.Add(-time.Hour), Caps{}); err != nil || why != "" {
		t.Fatal(why, err)
	}
	// The other replica's eviction lands between our read and our write.
	client.PrependReactor("update", "configmaps", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if conflicts.Add(1) > 1 {
			return false, nil, nil
		}
		// (Through the tracker: the fake clientset is locked while a reactor runs.)
		cmGVR := corev1.SchemeGroupVersion.WithResource("configmaps")
		obj, err := client.Tracker().Get(cmGVR, "emptydir-guard", "ledger")
		if err != nil {
			t.Error(err)
			return true, nil, err
		}
		cm := obj.(*corev1.ConfigMap)
		var st ledgerState
		_ = json.Unmarshal([]byte(cm.Data[ledgerDataKey]), &st)
		st.Entries = append(st.Entries, ledgerEntry{ID: "other", At: testNow, UID: "other-uid", Node: "n1", Namespace: "ns", Outcome: OutcomeEvicted})
		raw, _ := json.Marshal(st)
		cm.Data[ledgerDataKey] = string(raw)
		if err := client.Tracker().Update(cmGVR, cm, "emptydir-guard"); err != nil {
			t.Error(err)
		}
		return true, nil, apierrors.NewConflict(configMapsResource, "ledger", fmt.Errorf("the object has been modified"))
	})
	_, why, _, err := l.reserve(ctx, "our-uid", "n2", "ns2", testNow, caps)
	if err != nil || why != SkipCapGlobal {
		t.Fatalf("reservation after a conflict: %q, %v; want cap_global from the fresh copy", why, err)
	}
	if conflicts.Load() < 2 {
		t.Errorf("%d update attempts: the conflict was not retried", conflicts.Load())
	}
	for _, e := range ledgerCM(t, client) {
		if e.UID == "our-uid" {
			t.Error("our reservation was stored over the cap")
		}
	}
}

// A stored ledger that cannot be read is an error (retry), never "nothing was evicted".
func TestLedgerConfigMapUnreadableRefuses(t *testing.T) {
	client := fake.NewClientset(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "emptydir-guard", Name: "ledger"},
		Data: map[string]string{ledgerDataKey: "{not json"}})
	l := newLedger(&configMapStore{client: client, namespace: "emptydir-guard", name: "ledger"}, 0, 0)
	if _, _, err := l.last(t.Context(), "uid"); err == nil {
		t.Error("last: no error on a broken ledger")
	}
	if r, why, _, err := l.reserve(t.Context(), "uid", "n", "ns", testNow, Caps{}); err == nil || r != nil {
		t.Errorf("reserve on a broken ledger: %v %q %v", r, why, err)
	}
	client.PrependReactor("get", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("etcd down")
	})
	if _, _, err := l.last(context.Background(), "uid"); err == nil {
		t.Error("last: no error when the API server fails")
	}
}

// The standby that takes over (a second Server on the same API server) refuses what the
// caps forbid after the first one's evictions; with the old in-memory ledger it evicted.
func TestCapsHoldAcrossServers(t *testing.T) {
	cfg := testConfig()
	cfg.Caps = Caps{Global: 1, Window: 10 * time.Minute}
	e := newEnv(t, cfg, newPod("default", "web-0", uid1).build(), newPod("default", "web-1", uid2).build())
	e.measurer.used[uid1], e.measurer.used[uid2] = 10*mib, 10*mib
	first, second := e.ledgerReplica(cfg), e.ledgerReplica(cfg)
	if res := first.handleAlert(t.Context(), 0, firing("default", "web-0", uid1)); res.Outcome != OutcomeEvicted {
		t.Fatalf("first replica: %+v, want evicted", res)
	}
	res := second.handleAlert(t.Context(), 0, firing("default", "web-1", uid2))
	if res.Outcome != OutcomeSkipped || res.Reason != SkipCapGlobal {
		t.Fatalf("second replica: %s/%s %q, want skipped/cap_global", res.Outcome, res.Reason, res.Message)
	}
	if n := e.evictions(); n != 1 {
		t.Errorf("%d evictions, want 1", n)
	}
}

// gatedStore is a memoryStore whose first save waits for gate: a write in flight.
type gatedStore struct {
	*memoryStore
	saves atomic.Int32
	gate  chan struct{}
}

func (g *gatedStore) save(ctx context.Context, st ledgerState, version string) error {
	if g.saves.Add(1) == 1 {
		<-g.gate
	}
	return g.memoryStore.save(ctx, st, version)
}

func (l *ledger) pendingChanges() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.pending)
}

// A burst of reservations while a write is in flight is stored by one more write, not one
// each (which made commits queue past their timeout under load), and the cap still holds
// exactly: each change in a batch sees the ones before it. A change whose caller gave up
// before the batch took it is never applied.
func TestLedgerBatchesConcurrentChanges(t *testing.T) {
	store := &gatedStore{memoryStore: &memoryStore{}, gate: make(chan struct{})}
	l := newLedger(store, 0, time.Hour)
	caps := Caps{Global: 30, Window: time.Hour}
	const burst = 50
	var granted, capped atomic.Int32
	reserve := func(uid string) {
		_, why, _, err := l.reserve(context.Background(), uid, "n1", "ns", testNow, caps)
		switch {
		case err != nil:
			t.Errorf("%s: %v", uid, err)
		case why == "":
			granted.Add(1)
		case why == SkipCapGlobal:
			capped.Add(1)
		default:
			t.Errorf("%s: %q", uid, why)
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() { reserve("uid-0") })
	waitFor(t, "the first write in flight", func() bool { return store.saves.Load() == 1 })
	for i := 1; i < burst; i++ {
		wg.Go(func() { reserve(fmt.Sprintf("uid-%d", i)) })
	}
	ctx, giveUp := context.WithCancel(context.Background())
	withdrawn := make(chan error, 1)
	waitFor(t, "the burst queued", func() bool { return l.pendingChanges() == burst-1 })
	go func() {
		_, _, _, err := l.reserve(ctx, "uid-gave-up", "n1", "ns", testNow, Caps{})
		withdrawn <- err
	}()
	waitFor(t, "the last change queued", func() bool { return l.pendingChanges() == burst })
	giveUp()
	if err := <-withdrawn; err == nil {
		t.Error("a change whose context ended while queued was applied")
	}
	close(store.gate)
	wg.Wait()
	if n := store.saves.Load(); n != 2 {
		t.Errorf("%d writes for %d changes queued behind one write, want 2", n, burst)
	}
	if granted.Load() != int32(caps.Global) || capped.Load() != burst-int32(caps.Global) {
		t.Errorf("%d granted, %d capped; want %d and %d", granted.Load(), capped.Load(), caps.Global, burst-caps.Global)
	}
	if _, ok, _ := l.last(t.Context(), "uid-gave-up"); ok {
		t.Error("the withdrawn change was stored")
	}
	if n := len(store.st.Entries); n != caps.Global {
		t.Errorf("%d entries stored, want %d", n, caps.Global)
	}
}

// Without a cooldown, a slot another replica reserved and has not yet committed (it is
// evicting that pod right now: two replicas both believing they lead) keeps the UID from a
// second eviction; a reservation older than the handling of one alert was left by a replica
// that crashed and holds nothing back.
func TestLedgerReservationInProgressIsDuplicate(t *testing.T) {
	store := &memoryStore{}
	oldLeader, newLeader := newLedger(store, 0, time.Hour), newLedger(store, 0, time.Hour)
	ctx := t.Context()
	if _, why, _, err := oldLeader.reserve(ctx, "uid-x", "n1", "ns", testNow, Caps{}); err != nil || why != "" {
		t.Fatal(why, err)
	}
	tests := []struct {
		after time.Duration
		want  string
	}{
		{time.Second, SkipDuplicate},
		{oldLeader.inProgress + time.Second, ""},
	}
	for _, tt := range tests {
		slot, why, _, err := newLeader.reserve(ctx, "uid-x", "n1", "ns", testNow.Add(tt.after), Caps{})
		if err != nil || why != tt.want {
			t.Errorf("+%s: %q %v, want %q", tt.after, why, err, tt.want)
		}
		if slot != nil {
			_ = slot.release(ctx)
		}
	}
}
