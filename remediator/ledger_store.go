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
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
)

// ledgerDataKey is the ConfigMap key holding the ledger as JSON.
const ledgerDataKey = "ledger.json"

// versionAbsent is the version of a ledger ConfigMap that does not exist yet: save creates it.
const versionAbsent = "absent"

var configMapsResource = schema.GroupResource{Resource: "configmaps"}

// configMapStore keeps the ledger in a ConfigMap, with its resourceVersion as the version:
// an update from a state another replica changed meanwhile fails with Conflict.
type configMapStore struct {
	client    kubernetes.Interface
	namespace string
	name      string
}

func (s *configMapStore) load(ctx context.Context) (ledgerState, string, error) {
	cm, err := s.client.CoreV1().ConfigMaps(s.namespace).Get(ctx, s.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return ledgerState{}, versionAbsent, nil
	}
	if err != nil {
		return ledgerState{}, "", fmt.Errorf("getting ConfigMap %s/%s: %w", s.namespace, s.name, err)
	}
	var st ledgerState
	if raw := cm.Data[ledgerDataKey]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &st); err != nil {
			// A broken copy must not turn into "nothing was evicted": refuse to act.
			return ledgerState{}, "", fmt.Errorf("ConfigMap %s/%s key %s: %w", s.namespace, s.name, ledgerDataKey, err)
		}
	}
	return st, cm.ResourceVersion, nil
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
	if version == versionAbsent {
		_, err = cms.Create(ctx, cm, metav1.CreateOptions{FieldManager: Component})
		if apierrors.IsAlreadyExists(err) {
			// Another replica created it first: same as a lost update.
			return apierrors.NewConflict(configMapsResource, s.name, err)
		}
	} else {
		cm.ResourceVersion = version // optimistic concurrency: Conflict if it changed
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{FieldManager: Component})
	}
	if err != nil {
		return fmt.Errorf("writing ConfigMap %s/%s: %w", s.namespace, s.name, err)
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
