package exporter

import (
	"context"
	"fmt"
	"sort"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/emptydir-guard/emptydir-guard/exporter/part"
)

// PodLister answers which pods on this node have emptyDir volumes, from a local
// cache: the exporter never lists pods from the API server per cycle.
type PodLister interface {
	// List returns the pods with emptyDir volumes in use, sorted by namespace and name.
	List() ([]part.Pod, error)
	// Get returns one pod by namespace and name; ok is false when it is not on this node.
	Get(namespace, name string) (pv part.Pod, ok bool, err error)
	// HasSynced reports whether the cache has caught up with the API server once.
	HasSynced() bool
}

// PodWatcher is a PodLister fed by an informer scoped to one node with a
// spec.nodeName field selector.
type PodWatcher struct {
	nodeName string
	factory  informers.SharedInformerFactory
	informer cache.SharedIndexInformer
	lister   corelisters.PodLister
	// onError receives every failed list or watch request (SetWatchErrorHandler).
	onError atomic.Pointer[func(error)]
	// ephemeralStorage adds the other parts of the pod's ephemeral storage to pods with an
	// ephemeral-storage limit (SetEphemeralStorage).
	ephemeralStorage atomic.Bool
	// allowNamespaces (all when empty) less denyNamespaces are the namespaces whose pods are
	// measured (SetNamespaces).
	allowNamespaces, denyNamespaces sets.Set[string]
}

// SetNamespaces limits the watcher to the pods of the namespaces in allow (every namespace
// when empty) that are not in deny, as kube-state-metrics' --namespaces and
// --namespaces-denylist do: the others' volumes are neither measured, published nor answered
// live. The API server already leaves the denied namespaces' pods out of the watch. Call it
// before Start.
func (w *PodWatcher) SetNamespaces(allow, deny []string) {
	w.allowNamespaces, w.denyNamespaces = sets.New(allow...), sets.New(deny...)
}

// measures reports whether the watcher measures the pods of namespace.
func (w *PodWatcher) measures(namespace string) bool {
	return (w.allowNamespaces.Len() == 0 || w.allowNamespaces.Has(namespace)) && !w.denyNamespaces.Has(namespace)
}

// fieldSelector asks the API server for the pods of this node outside the denied namespaces.
func (w *PodWatcher) fieldSelector() string {
	terms := []fields.Selector{fields.OneTermEqualSelector("spec.nodeName", w.nodeName)}
	for _, ns := range sets.List(w.denyNamespaces) {
		terms = append(terms, fields.OneTermNotEqualSelector("metadata.namespace", ns))
	}
	return fields.AndSelectors(terms...).String()
}

// SetEphemeralStorage has the watcher list, beside emptyDir volumes, the writable layers,
// logs and other local ephemeral volumes of every pod with an ephemeral-storage limit, with
// the limits the kubelet checks (withStorage). Call it before Start.
func (w *PodWatcher) SetEphemeralStorage(on bool) { w.ephemeralStorage.Store(on) }

// podVolumes is what the watcher lists of pod; false when nothing of it is measured.
func (w *PodWatcher) podVolumes(p *corev1.Pod) (part.Pod, bool) {
	pv, ok := podBase(p)
	if !ok {
		return part.Pod{}, false
	}
	if w.ephemeralStorage.Load() {
		pv = withStorage(pv, p)
	}
	return pv, len(pv.Parts) > 0
}

// NewPodWatcher prepares an informer over the pods of nodeName. Call Start to run it.
func NewPodWatcher(client kubernetes.Interface, nodeName string, resync time.Duration) (*PodWatcher, error) {
	w := &PodWatcher{nodeName: nodeName, factory: informers.NewSharedInformerFactory(client, resync)}
	pods := client.CoreV1().Pods(metav1.NamespaceAll)
	// The requests are made here, rather than by the generated pod informer, so that each
	// failure is seen: client-go's reflector retries a watch the API server refuses (it is
	// down, or throttling) without telling its watch error handler, so an API server outage
	// would go unnoticed.
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = w.fieldSelector()
			list, err := pods.List(ctx, o)
			w.requestFailed(ctx, err)
			return list, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = w.fieldSelector()
			wi, err := pods.Watch(ctx, o)
			w.requestFailed(ctx, err)
			return wi, err
		},
	}
	w.informer = w.factory.InformerFor(&corev1.Pod{}, func(client kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, client), &corev1.Pod{},
			cache.SharedIndexInformerOptions{ResyncPeriod: resync, Indexers: cache.Indexers{
				cache.NamespaceIndex: cache.MetaNamespaceIndexFunc, uidIndex: podUIDIndexFunc}})
	})
	w.lister = corelisters.NewPodLister(w.informer.GetIndexer())
	// Keep only what the exporter reads: a node may run hundreds of pods whose
	// managed fields and status details would otherwise sit in memory.
	if err := w.informer.SetTransform(trimPod); err != nil {
		return nil, fmt.Errorf("setting pod transform: %w", err)
	}
	return w, nil
}

// requestFailed hands a failed list or watch request to the error handler; the end of the
// informer's own context is no failure.
func (w *PodWatcher) requestFailed(ctx context.Context, err error) {
	if err == nil || ctx.Err() != nil {
		return
	}
	if h := w.onError.Load(); h != nil {
		(*h)(err)
	}
}

// Start runs the informer until ctx ends and waits for its first sync or ctx.
func (w *PodWatcher) Start(ctx context.Context) error {
	w.factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), w.informer.HasSynced) {
		return fmt.Errorf("pod informer did not sync: %w", context.Cause(ctx))
	}
	return nil
}

// Shutdown waits for the informer goroutines once ctx has ended.
func (w *PodWatcher) Shutdown() { w.factory.Shutdown() }

// HasSynced implements PodLister.
func (w *PodWatcher) HasSynced() bool { return w.informer.HasSynced() }

// List implements PodLister.
func (w *PodWatcher) List() ([]part.Pod, error) {
	pods, err := w.lister.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("listing pods from cache: %w", err)
	}
	out := make([]part.Pod, 0, len(pods))
	for _, p := range pods {
		if p.Spec.NodeName != w.nodeName || !w.measures(p.Namespace) || !w.kubeletRuns(p) {
			continue // see Get
		}
		if pv, ok := w.podVolumes(p); ok {
			out = append(out, pv)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Pod < out[j].Pod
	})
	return out, nil
}

// Get implements PodLister.
func (w *PodWatcher) Get(namespace, name string) (part.Pod, bool, error) {
	p, err := w.lister.Pods(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return part.Pod{}, false, nil
	}
	if err != nil {
		return part.Pod{}, false, fmt.Errorf("getting pod %s/%s from cache: %w", namespace, name, err)
	}
	// The field selector already keeps other nodes' pods out; checking again costs
	// nothing and keeps this node's exporter from ever walking for a pod it does not host.
	if p.Spec.NodeName != w.nodeName || !w.measures(p.Namespace) || !w.kubeletRuns(p) {
		return part.Pod{}, false, nil
	}
	pv, ok := w.podVolumes(p)
	return pv, ok, nil
}

// uidIndex indexes the informer's pods by UID.
const uidIndex = "uid"

func podUIDIndexFunc(obj any) ([]string, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	return []string{string(p.UID)}, nil
}

// kubeletRuns reports whether the kubelet of this node runs pod p as the API shows it. A
// mirror pod (a static pod's API object) names the directory of its volumes by its annotation's
// config hash, and anyone who may create pods may set that annotation: a forged one would
// choose whose directory is measured under the forger's name. The kubelet never runs such a pod
// (it deletes mirror pods it has no static pod for), so it is trusted only as the kubelet
// creates one: controlled by this Node, and with a hash that is not the UID of a pod in the
// API (the directory of an ordinary pod).
func (w *PodWatcher) kubeletRuns(p *corev1.Pod) bool {
	hash, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]
	if !mirror {
		return true
	}
	owner := metav1.GetControllerOfNoCopy(p)
	if owner == nil || owner.Kind != "Node" || owner.APIVersion != "v1" || owner.Name != w.nodeName {
		return false
	}
	others, err := w.informer.GetIndexer().ByIndex(uidIndex, hash)
	return err == nil && len(others) == 0
}

// trimPod drops what podVolumes and withStorage never read. Of the annotations it keeps the
// mirror pod's config hash: the kubelet keeps a static pod's volumes under it; of the status,
// the phase and which containers (ephemeral ones included) run under which runtime ID.
func trimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil // tombstones pass through untouched
	}
	p.ManagedFields = nil
	if hash, static := p.Annotations[corev1.MirrorPodAnnotationKey]; static {
		p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: hash}
	} else {
		p.Annotations = nil
	}
	p.Status = corev1.PodStatus{Phase: p.Status.Phase, QOSClass: p.Status.QOSClass,
		InitContainerStatuses:      trimStatuses(p.Status.InitContainerStatuses),
		ContainerStatuses:          trimStatuses(p.Status.ContainerStatuses),
		EphemeralContainerStatuses: trimStatuses(p.Status.EphemeralContainerStatuses)}
	return p, nil
}

// trimStatuses keeps of each container status its name, its runtime ID and whether it runs.
func trimStatuses(in []corev1.ContainerStatus) []corev1.ContainerStatus {
	if len(in) == 0 {
		return nil
	}
	out := make([]corev1.ContainerStatus, len(in))
	for i, cs := range in {
		out[i] = corev1.ContainerStatus{Name: cs.Name, ContainerID: cs.ContainerID}
		if cs.State.Running != nil {
			out[i].State.Running = &corev1.ContainerStateRunning{}
		}
	}
	return out
}

// SetWatchErrorHandler reports every failed list or watch request of the informer to
// handler, retries included (client-go retries them with a backoff of up to 30s). Call it
// before Start.
func (w *PodWatcher) SetWatchErrorHandler(handler func(err error)) {
	w.onError.Store(&handler)
}
