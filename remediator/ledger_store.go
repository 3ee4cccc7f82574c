package remediator

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// ledgerDataKey is the ConfigMap key holding the ledger as JSON.
const ledgerDataKey = "ledger.json"

// versionAbsent is the version of a ledger ConfigMap that does not exist yet: save creates it.
const versionAbsent = "absent"

var configMapsResource = schema.GroupResource{Resource: "configmaps"}

// configMapStore keeps the ledger in a ConfigMap, with its resourceVersion as the version:
// an update from a state another replica changed meanwhile fails with Conflict.
//
// Reads come from a watch of that one ConfigMap (an informer with a metadata.name field
// selector) overlaid with this process's own last write, so a decision costs no GET. A read
// may be stale; that is safe because every decision ends in a write carrying the version it
// was made on, which the API server refuses with Conflict when the ConfigMap changed. After
// a conflict the next read is a GET, so the retry works on the current copy. Until the
// informer has synced (and without one) every read is a GET.
type configMapStore struct {
	client    kubernetes.Interface
	namespace string
	name      string
	// observe counts each operation (LedgerOp*) and its result (LedgerResult*); nil: not counted.
	observe func(op, result string)

	informer cache.SharedIndexInformer // nil until start

	mu      sync.Mutex
	mustGet bool            // a write conflicted: the next read asks the API server
	written *ledgerSnapshot // this process's last write, until the watch delivers it
	decoded *ledgerSnapshot // the last copy decoded, to skip decoding an unchanged object
}

// ledgerSnapshot is the ledger as stored at one resourceVersion.
type ledgerSnapshot struct {
	version string
	st      ledgerState
}

// clone returns a copy the caller may change.
func (s *ledgerSnapshot) clone() ledgerState {
	return ledgerState{Entries: append([]ledgerEntry(nil), s.st.Entries...)}
}

// Operations and results of emptydir_remediator_ledger_operations_total.
const (
	LedgerOpCacheRead = "cache_read" // a read served by the watch (or this process's last write)
	LedgerOpGet       = "get"        // a read from the API server
	LedgerOpWrite     = "write"      // a create or resourceVersion-guarded update

	LedgerResultSuccess  = "success"
	LedgerResultConflict = "conflict" // another writer changed the ConfigMap first: retried on the fresh copy
	LedgerResultError    = "error"
)

func (s *configMapStore) count(op, result string) {
	if s.observe != nil {
		s.observe(op, result)
	}
}

func (s *configMapStore) key() string { return s.namespace + "/" + s.name }

// start runs the informer on the ledger ConfigMap until stop is closed. Reads are GETs
// until it has synced.
func (s *configMapStore) start(stop <-chan struct{}) {
	inf := coreinformers.NewFilteredConfigMapInformer(s.client, s.namespace, 0, cache.Indexers{}, func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector(metav1.ObjectNameField, s.name).String()
	})
	// The watch has caught up with this process's own write: the cache is as new as it.
	seen := func(obj any) {
		if cm, ok := obj.(*corev1.ConfigMap); ok {
			s.mu.Lock()
			if s.written != nil && caughtUp(cm.ResourceVersion, s.written.version) {
				s.written = nil
			}
			s.mu.Unlock()
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    seen,
		UpdateFunc: func(_, obj any) { seen(obj) },
		DeleteFunc: func(any) { s.mu.Lock(); s.written = nil; s.mu.Unlock() },
	})
	s.mu.Lock()
	s.informer = inf
	s.mu.Unlock()
	go inf.Run(stop)
}

func (s *configMapStore) load(ctx context.Context) (ledgerState, string, error) {
	s.mu.Lock()
	inf, get := s.informer, s.mustGet
	s.mustGet = false
	if inf != nil && !get && s.written != nil {
		// A relist delivers only the current copy: it may have skipped the own write's
		// version, and then no event ever ends the overlay but a newer copy in the cache.
		if obj, ok, _ := inf.GetStore().GetByKey(s.key()); ok && caughtUp(obj.(*corev1.ConfigMap).ResourceVersion, s.written.version) {
			s.written = nil
		} else {
			st, version := s.written.clone(), s.written.version
			s.mu.Unlock()
			s.count(LedgerOpCacheRead, LedgerResultSuccess)
			return st, version, nil
		}
	}
	s.mu.Unlock()
	if get || inf == nil || !inf.HasSynced() {
		return s.get(ctx)
	}
	obj, exists, err := inf.GetStore().GetByKey(s.key())
	if err != nil {
		s.count(LedgerOpCacheRead, LedgerResultError)
		return ledgerState{}, "", fmt.Errorf("reading ConfigMap %s from the watch cache: %w", s.key(), err)
	}
	if !exists {
		s.count(LedgerOpCacheRead, LedgerResultSuccess)
		return ledgerState{}, versionAbsent, nil
	}
	return s.decodeRead(LedgerOpCacheRead, obj.(*corev1.ConfigMap))
}

// caughtUp reports whether a copy at resourceVersion cached is at least as new as the own
// write at written. resourceVersions compare as integers (as the API server's are); one that
// is not an integer only matches itself.
func caughtUp(cached, written string) bool {
	if cached == written {
		return true
	}
	c, err := resourceversion.CompareResourceVersion(cached, written)
	return err == nil && c >= 0
}

// get reads the ConfigMap from the API server.
func (s *configMapStore) get(ctx context.Context) (ledgerState, string, error) {
	cm, err := s.client.CoreV1().ConfigMaps(s.namespace).Get(ctx, s.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		s.count(LedgerOpGet, LedgerResultSuccess)
		return ledgerState{}, versionAbsent, nil
	}
	if err != nil {
		s.count(LedgerOpGet, LedgerResultError)
		return ledgerState{}, "", fmt.Errorf("getting ConfigMap %s: %w", s.key(), err)
	}
	return s.decodeRead(LedgerOpGet, cm)
}

// decodeRead decodes the ConfigMap that the read op returned, counting op's result: a
// ledger that does not decode fails the read.
func (s *configMapStore) decodeRead(op string, cm *corev1.ConfigMap) (ledgerState, string, error) {
	st, err := s.decode(cm)
	if err != nil {
		s.count(op, LedgerResultError)
		return ledgerState{}, "", err
	}
	s.count(op, LedgerResultSuccess)
	return st, cm.ResourceVersion, nil
}

// decode returns the ledger stored in cm, decoding it only when its version changed.
func (s *configMapStore) decode(cm *corev1.ConfigMap) (ledgerState, error) {
	s.mu.Lock()
	if d := s.decoded; d != nil && cm.ResourceVersion != "" && d.version == cm.ResourceVersion {
		st := d.clone()
		s.mu.Unlock()
		return st, nil
	}
	s.mu.Unlock()
	var st ledgerState
	if raw := cm.Data[ledgerDataKey]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &st); err != nil {
			// A broken copy must not turn into "nothing was evicted": refuse to act.
			return ledgerState{}, fmt.Errorf("ConfigMap %s key %s: %w", s.key(), ledgerDataKey, err)
		}
	}
	snap := &ledgerSnapshot{version: cm.ResourceVersion, st: st}
	s.mu.Lock()
	s.decoded = snap
	s.mu.Unlock()
	return snap.clone(), nil
}

func (s *configMapStore) save(ctx context.Context, st ledgerState, version string) error {
	raw, err := json.Marshal(st)
	if err != nil {
		return err
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.namespace, Name: s.name,
			Labels: map[string]string{"app.kubernetes.io/name": Component, "app.kubernetes.io/component": "eviction-ledger"}},
		Data: map[string]string{ledgerDataKey: string(raw)},
	}
	cms := s.client.CoreV1().ConfigMaps(s.namespace)
	var out *corev1.ConfigMap
	if version == versionAbsent {
		out, err = cms.Create(ctx, cm, metav1.CreateOptions{FieldManager: Component})
		if apierrors.IsAlreadyExists(err) {
			// Another replica created it first: same as a lost update.
			err = apierrors.NewConflict(configMapsResource, s.name, err)
		}
	} else {
		cm.ResourceVersion = version // optimistic concurrency: Conflict if it changed
		out, err = cms.Update(ctx, cm, metav1.UpdateOptions{FieldManager: Component})
	}
	switch {
	case apierrors.IsConflict(err):
		s.count(LedgerOpWrite, LedgerResultConflict)
		s.mu.Lock()
		s.mustGet, s.written = true, nil // what was read is outdated: the retry reads the current copy
		s.mu.Unlock()
		return fmt.Errorf("writing ConfigMap %s: %w", s.key(), err)
	case err != nil:
		s.count(LedgerOpWrite, LedgerResultError)
		return fmt.Errorf("writing ConfigMap %s: %w", s.key(), err)
	}
	s.count(LedgerOpWrite, LedgerResultSuccess)
	snap := &ledgerSnapshot{version: out.ResourceVersion, st: ledgerState{Entries: append([]ledgerEntry(nil), st.Entries...)}}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.decoded, s.written = snap, snap
	// The watch may have delivered this version before it was recorded here.
	if s.informer != nil {
		if obj, ok, _ := s.informer.GetStore().GetByKey(s.key()); ok && obj.(*corev1.ConfigMap).ResourceVersion == snap.version {
			s.written = nil
		}
	}
	return nil
}

// memoryStore keeps the ledger in this process only: for a single replica without a
// namespace of its own (outside a pod) and for tests.
type memoryStore struct {
	mu      sync.Mutex
	st      ledgerState
	version int
}

func (m *memoryStore) load(context.Context) (ledgerState, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return ledgerState{Entries: append([]ledgerEntry(nil), m.st.Entries...)}, strconv.Itoa(m.version), nil
}

func (m *memoryStore) save(_ context.Context, st ledgerState, version string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if version != strconv.Itoa(m.version) {
		return apierrors.NewConflict(configMapsResource, "memory", fmt.Errorf("version %s is not the current %d", version, m.version))
	}
	m.st = ledgerState{Entries: append([]ledgerEntry(nil), st.Entries...)}
	m.version++
	return nil
}
