package exporter

import (
	"context"
	"errors"
	"net"
	"net/url"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/emptydir-guard/emptydir-guard/exporter/part"
)

// podBuilder makes pods for table tests.
type podBuilder struct{ pod *corev1.Pod }

func newPod(ns, name, uid string) *podBuilder {
	return &podBuilder{pod: &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid),
			Annotations:   map[string]string{"big": "annotation"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
		Spec:   corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "main"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Message: "long status"},
	}}
}

func (b *podBuilder) emptyDir(name string, medium corev1.StorageMedium, sizeLimit string) *podBuilder {
	ed := &corev1.EmptyDirVolumeSource{Medium: medium}
	if sizeLimit != "" {
		q := resource.MustParse(sizeLimit)
		ed.SizeLimit = &q
	}
	b.pod.Spec.Volumes = append(b.pod.Spec.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: ed}})
	return b
}

func (b *podBuilder) configMap(name string) *podBuilder {
	b.pod.Spec.Volumes = append(b.pod.Spec.Volumes, corev1.Volume{Name: name,
		VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}})
	return b.mount(name)
}

func (b *podBuilder) mount(names ...string) *podBuilder {
	for _, n := range names {
		b.pod.Spec.Containers[0].VolumeMounts = append(b.pod.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: n})
	}
	return b
}

func (b *podBuilder) initMount(name string) *podBuilder {
	b.pod.Spec.InitContainers = append(b.pod.Spec.InitContainers, corev1.Container{Name: "init",
		VolumeMounts: []corev1.VolumeMount{{Name: name}}})
	return b
}

func (b *podBuilder) node(n string) *podBuilder { b.pod.Spec.NodeName = n; return b }

func (b *podBuilder) annotate(k, v string) *podBuilder { b.pod.Annotations[k] = v; return b }

// mirrorOf makes the pod a static pod's mirror as the kubelet of node creates it: the
// config hash annotation and the Node as its controller.
func (b *podBuilder) mirrorOf(node, hash string) *podBuilder {
	b.pod.OwnerReferences = append(b.pod.OwnerReferences, nodeController(node))
	return b.annotate(corev1.MirrorPodAnnotationKey, hash)
}

func nodeController(node string) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: node, UID: "node-uid", Controller: ptr.To(true)}
}

func (b *podBuilder) phase(p corev1.PodPhase) *podBuilder { b.pod.Status.Phase = p; return b }

func TestPodVolumes(t *testing.T) {
	cases := []struct {
		name   string
		pod    *corev1.Pod
		want   []part.Part
		wantOK bool
	}{
		{"seed pod: disk, 1Mi",
			newPod("default", "empty-test1", "u1").emptyDir("empty", "", "1Mi").mount("empty").pod,
			[]part.Part{{Name: "empty", Medium: part.MediumDisk, LimitBytes: limit(1 << 20)}}, true},
		{"memory medium without limit",
			newPod("a", "b", "u2").emptyDir("shm", corev1.StorageMediumMemory, "").mount("shm").pod,
			[]part.Part{{Name: "shm", Medium: part.MediumMemory}}, true},
		{"hugepages medium with page size",
			newPod("a", "b", "u3").emptyDir("hp", "HugePages-2Mi", "").mount("hp").pod,
			[]part.Part{{Name: "hp", Medium: part.MediumHugePages}}, true},
		{"zero sizeLimit means none",
			newPod("a", "b", "u4").emptyDir("v", "", "0").mount("v").pod,
			[]part.Part{{Name: "v", Medium: part.MediumDisk}}, true},
		{"decimal quantity",
			newPod("a", "b", "u5").emptyDir("v", "", "500M").mount("v").pod,
			[]part.Part{{Name: "v", Medium: part.MediumDisk, LimitBytes: limit(500_000_000)}}, true},
		{"unmounted emptyDir is not set up, so not listed",
			newPod("a", "b", "u6").emptyDir("used", "", "1Gi").emptyDir("unused", "", "1Gi").mount("used").pod,
			[]part.Part{{Name: "used", Medium: part.MediumDisk, LimitBytes: limit(1 << 30)}}, true},
		{"mounted by an init container only",
			newPod("a", "b", "u7").emptyDir("work", "", "").initMount("work").pod,
			[]part.Part{{Name: "work", Medium: part.MediumDisk}}, true},
		{"other volume types are ignored",
			newPod("a", "b", "u8").configMap("cfg").pod, nil, false},
		{"failed pod's volumes are being torn down",
			newPod("a", "b", "u9").emptyDir("v", "", "1Mi").mount("v").phase(corev1.PodFailed).pod, nil, false},
		{"succeeded pod too",
			newPod("a", "b", "u10").emptyDir("v", "", "1Mi").mount("v").phase(corev1.PodSucceeded).pod, nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := podVolumes(tc.pod)
			if ok != tc.wantOK || !reflect.DeepEqual(got.Parts, tc.want) {
				t.Errorf("got %+v (ok=%v), want %+v (ok=%v)", got.Parts, ok, tc.want, tc.wantOK)
			}
			if ok && (got.Namespace != tc.pod.Namespace || got.Pod != tc.pod.Name || got.UID != string(tc.pod.UID)) {
				t.Errorf("identity %s/%s/%s lost", got.Namespace, got.Pod, got.UID)
			}
		})
	}
}

// The kubelet's static pod hash: hex of a 128-bit FNV (pkg/kubelet/config applyDefaults).
const staticHash = "6c3a0ff2b15a4cd8e7b6f9b1f7a0c2d4"

func TestPodVolumesOfStaticPods(t *testing.T) {
	tests := []struct {
		name, hash string
		wantOK     bool
	}{
		{"kubelet's hex hash", staticHash, true},
		{"metadata.uid from the manifest", "5cf142d1-7a2d-4698-a7e0-f6ebfc0d4b7d", true},
		{"empty", "", false},
		{"parent directory", "..", false},
		{"path", "../../../etc", false},
		{"slash", "a/b", false},
		{"dot", ".", false},
		{"NUL", "a\x00b", false},
		{"too long", strings.Repeat("a", 129), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := newPod("kube-system", "etcd-node-1", "api-uid").annotate(corev1.MirrorPodAnnotationKey, tc.hash).
				emptyDir("data", "", "").mount("data").pod

			got, ok := podVolumes(pod)

			if ok != tc.wantOK {
				t.Fatalf("listed: %v, want %v", ok, tc.wantOK)
			}
			if !ok {
				return
			}
			if got.UID != "api-uid" || got.ConfigHash != tc.hash || got.KubeletUID() != tc.hash {
				t.Errorf("UID %q, ConfigHash %q, KubeletUID %q; want the API UID api-uid and the hash %q for the directory",
					got.UID, got.ConfigHash, got.KubeletUID(), tc.hash)
			}
		})
	}

	userns := newPod("a", "b", "api-uid").emptyDir("v", "", "").mount("v").pod
	userns.Spec.HostUsers = ptr.To(false)
	for _, tc := range []struct {
		hostUsers *bool
		want      bool
	}{{nil, false}, {ptr.To(true), false}, {ptr.To(false), true}} {
		userns.Spec.HostUsers = tc.hostUsers
		if got, _ := podVolumes(userns); got.UserNamespace != tc.want {
			t.Errorf("hostUsers %v: UserNamespace %v, want %v", tc.hostUsers, got.UserNamespace, tc.want)
		}
	}
	plain, _ := podVolumes(newPod("a", "b", "api-uid").emptyDir("v", "", "").mount("v").pod)
	if plain.ConfigHash != "" || plain.KubeletUID() != "api-uid" {
		t.Errorf("a pod from the API: ConfigHash %q, KubeletUID %q; want none and the API UID", plain.ConfigHash, plain.KubeletUID())
	}
}

// startPodWatcher runs a watcher of node-1 over client until the test ends, synced, and
// returns it with the context it runs under.
func startPodWatcher(t *testing.T, client *fake.Clientset) (*PodWatcher, context.Context) {
	t.Helper()
	w, err := NewPodWatcher(client, "node-1", 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(func() { cancel(); w.Shutdown() })
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return w, ctx
}

// listSelectors records the field selector of every pod list client serves, for the test to
// read: the fake tracker ignores field selectors, and what the informer asks for is what a
// real API server filters on.
func listSelectors(client *fake.Clientset) func() []string {
	var mu sync.Mutex
	var selectors []string
	client.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		selectors = append(selectors, a.(k8stesting.ListAction).GetListRestrictions().Fields.String())
		return false, nil, nil
	})
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(selectors)
	}
}

func TestPodWatcherScopesToNodeAndTrims(t *testing.T) {
	client := fake.NewClientset(
		newPod("shop", "cart-0", "uid-cart").emptyDir("cache", "", "1Mi").mount("cache").pod,
		newPod("shop", "plain", "uid-plain").configMap("cfg").pod,
		newPod("web", "front", "uid-front").emptyDir("tmp", corev1.StorageMediumMemory, "64Mi").mount("tmp").pod,
		newPod("kube-system", "etcd-node-1", "uid-mirror").mirrorOf("node-1", staticHash).
			emptyDir("data", "", "").mount("data").pod,
		// The fake tracker ignores the field selector; the watcher must not trust it either.
		newPod("web", "elsewhere", "uid-elsewhere").node("node-2").emptyDir("tmp", "", "").mount("tmp").pod,
	)
	selectors := listSelectors(client)

	w, ctx := startPodWatcher(t, client)
	if !w.HasSynced() {
		t.Fatal("not synced after Start")
	}
	if got := selectors(); len(got) == 0 || got[0] != "spec.nodeName=node-1" {
		t.Errorf("list field selectors %q, want spec.nodeName=node-1", got)
	}

	got, err := w.List()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range got {
		names = append(names, p.Namespace+"/"+p.Pod)
	}
	if want := []string{"kube-system/etcd-node-1", "shop/cart-0", "web/front"}; !reflect.DeepEqual(names, want) {
		t.Errorf("List = %v, want %v (sorted, only this node's pods with emptyDir volumes)", names, want)
	}
	if _, ok, err := w.Get("web", "elsewhere"); ok || err != nil {
		t.Errorf("Get of a pod on node-2: ok=%v err=%v, want false, nil", ok, err)
	}
	if pv, ok, _ := w.Get("kube-system", "etcd-node-1"); !ok || pv.UID != "uid-mirror" || pv.KubeletUID() != staticHash {
		t.Errorf("static pod through the cache: %+v (ok=%v), want API UID uid-mirror and kubelet UID %s", pv, ok, staticHash)
	}

	pv, ok, err := w.Get("web", "front")
	if err != nil || !ok || pv.UID != "uid-front" || *pv.Parts[0].LimitBytes != 64<<20 {
		t.Errorf("Get(web/front) = %+v, %v, %v", pv, ok, err)
	}
	if _, ok, err := w.Get("web", "gone"); ok || err != nil {
		t.Errorf("Get of a missing pod: ok=%v err=%v, want false, nil", ok, err)
	}

	// The cache holds trimmed pods only.
	obj, _, _ := w.informer.GetIndexer().GetByKey("shop/cart-0")
	cached := obj.(*corev1.Pod)
	if cached.ManagedFields != nil || cached.Annotations != nil || cached.Status.Message != "" {
		t.Errorf("cached pod not trimmed: %+v", cached.ObjectMeta)
	}
	if cached.Status.Phase != corev1.PodRunning {
		t.Errorf("trim lost the phase: %q", cached.Status.Phase)
	}
	obj, _, _ = w.informer.GetIndexer().GetByKey("kube-system/etcd-node-1")
	if got, want := obj.(*corev1.Pod).Annotations, map[string]string{corev1.MirrorPodAnnotationKey: staticHash}; !reflect.DeepEqual(got, want) {
		t.Errorf("static pod's cached annotations %v, want only %v", got, want)
	}

	// A pod deleted on the API server leaves the list.
	if err := client.CoreV1().Pods("shop").Delete(ctx, "cart-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, _ := w.List()
		if len(got) == 2 && got[0].Pod == "etcd-node-1" && got[1].Pod == "front" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("deleted pod still listed: %+v", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestPodWatcherReportsRefusedWatches: while the API server is down its connections are
// refused, and client-go's reflector retries the watch without calling its watch error
// handler. Every failed request must still reach the handler (the exporter counts them in
// emptydir_exporter_pod_watch_errors_total), while the cache keeps serving.
func TestPodWatcherReportsRefusedWatches(t *testing.T) {
	client := fake.NewClientset(newPod("shop", "cart-0", "uid-cart").emptyDir("cache", "", "1Mi").mount("cache").pod)
	refused := &url.Error{Op: "Get", URL: "https://10.0.0.1:6443/api/v1/pods?watch=true",
		Err: &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}
	client.PrependWatchReactor("pods", func(k8stesting.Action) (bool, watch.Interface, error) {
		return true, nil, refused
	})
	w, err := NewPodWatcher(client, "node-1", 0)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var reported []error
	w.SetWatchErrorHandler(func(err error) {
		mu.Lock()
		defer mu.Unlock()
		reported = append(reported, err)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer func() { cancel(); w.Shutdown() }()
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for {
		mu.Lock()
		n := len(reported)
		mu.Unlock()
		if n >= 2 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("%d refused watches reported, want every retry (at least 2)", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	mu.Lock()
	for _, err := range reported {
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("reported %v, want the refused connection", err)
		}
	}
	mu.Unlock()
	if got, err := w.List(); err != nil || len(got) != 1 || got[0].Pod != "cart-0" {
		t.Errorf("List while the watch is refused = %+v, %v; want the cached pod", got, err)
	}
}

// TestPodWatcherIgnoresForgedMirrorPods: anyone who may create pods may set the mirror
// annotation, whose hash names the directory measured. Only a mirror pod as the kubelet creates
// it counts (this Node its controller, a hash that is no pod's UID); the kubelet runs no
// other, so the others have no series and no live answer (issue 18, item 13).
func TestPodWatcherIgnoresForgedMirrorPods(t *testing.T) {
	victim := newPod("shop", "cart-0", "11111111-2222-3333-4444-555555555555").emptyDir("cache", "", "1Mi").mount("cache")
	forged := func(name string) *podBuilder {
		return newPod("tenant", name, "uid-"+name).emptyDir("cache", "", "1Mi").mount("cache")
	}
	cases := []struct {
		name   string
		pod    *corev1.Pod
		listed bool
	}{
		{"mirror pod as the kubelet creates it", newPod("kube-system", "etcd-node-1", "uid-etcd").mirrorOf("node-1", staticHash).
			emptyDir("data", "", "").mount("data").pod, true},
		{"annotation without an owner", forged("no-owner").annotate(corev1.MirrorPodAnnotationKey, staticHash).pod, false},
		{"another node as its controller", forged("other-node").mirrorOf("node-2", staticHash).pod, false},
		{"this node as owner but not controller", func() *corev1.Pod {
			p := forged("not-controller").mirrorOf("node-1", staticHash).pod
			p.OwnerReferences[0].Controller = nil
			return p
		}(), false},
		{"a controller that is not a Node", func() *corev1.Pod {
			p := forged("not-node").mirrorOf("node-1", staticHash).pod
			p.OwnerReferences[0].Kind = "ReplicaSet"
			return p
		}(), false},
		{"another pod's UID as its hash", forged("other-uid").mirrorOf("node-1", string(victim.pod.UID)).pod, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w, _ := startPodWatcher(t, fake.NewClientset(victim.pod.DeepCopy(), tc.pod))
			got, err := w.List()
			if err != nil {
				t.Fatal(err)
			}
			listed := slices.ContainsFunc(got, func(p part.Pod) bool { return p.Pod == tc.pod.Name })
			_, ok, err := w.Get(tc.pod.Namespace, tc.pod.Name)
			if err != nil {
				t.Fatal(err)
			}
			if listed != tc.listed || ok != tc.listed {
				t.Errorf("listed %v, Get ok %v; want %v", listed, ok, tc.listed)
			}
			if !slices.ContainsFunc(got, func(p part.Pod) bool { return p.Pod == victim.pod.Name }) {
				t.Errorf("the ordinary pod is not listed: %+v", got)
			}
		})
	}
}

func TestPodVolumesSettling(t *testing.T) {
	deleting := metav1.NewTime(t0)
	cases := []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"running", newPod("a", "b", "u1").emptyDir("v", "", "").mount("v").pod, false},
		{"pending: volumes maybe not set up yet", newPod("a", "b", "u2").emptyDir("v", "", "").mount("v").phase(corev1.PodPending).pod, true},
		{"no phase yet", newPod("a", "b", "u3").emptyDir("v", "", "").mount("v").phase("").pod, true},
		{"running, deletion requested: volumes maybe torn down", func() *corev1.Pod {
			p := newPod("a", "b", "u4").emptyDir("v", "", "").mount("v").pod
			p.DeletionTimestamp = &deleting
			return p
		}(), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := podVolumes(tc.pod)
			if !ok || got.Settling != tc.want {
				t.Errorf("Settling = %v (ok=%v), want %v", got.Settling, ok, tc.want)
			}
		})
	}
}

// TestPodWatcherNamespaces: with SetNamespaces, the pods of namespaces outside the allowlist or
// in the denylist are neither listed nor got (so neither measured, published nor answered
// live), and the API server is asked to leave the denied ones out of the watch.
func TestPodWatcherNamespaces(t *testing.T) {
	pods := func() []runtime.Object {
		return []runtime.Object{
			newPod("shop", "cart-0", "uid-cart").emptyDir("cache", "", "1Mi").mount("cache").pod,
			newPod("web", "front", "uid-front").emptyDir("tmp", "", "").mount("tmp").pod,
			newPod("batch", "job-1", "uid-job").emptyDir("scratch", "", "").mount("scratch").pod,
		}
	}
	for _, tc := range []struct {
		name         string
		allow, deny  []string
		wantSelector string
		want         []string
	}{
		{"all", nil, nil, "spec.nodeName=node-1", []string{"batch/job-1", "shop/cart-0", "web/front"}},
		{"allowlist", []string{"shop", "web"}, nil, "spec.nodeName=node-1", []string{"shop/cart-0", "web/front"}},
		{"denylist", nil, []string{"web", "batch"}, "metadata.namespace!=batch,metadata.namespace!=web,spec.nodeName=node-1", []string{"shop/cart-0"}},
		{"both", []string{"shop", "web"}, []string{"web"}, "metadata.namespace!=web,spec.nodeName=node-1", []string{"shop/cart-0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset(pods()...)
			selectors := listSelectors(client)
			w, err := NewPodWatcher(client, "node-1", 0)
			if err != nil {
				t.Fatal(err)
			}
			w.SetNamespaces(tc.allow, tc.deny)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			t.Cleanup(func() { cancel(); w.Shutdown() })
			if err := w.Start(ctx); err != nil {
				t.Fatal(err)
			}
			if got := selectors(); len(got) == 0 || got[0] != tc.wantSelector {
				t.Errorf("list field selectors %q, want %q", got, tc.wantSelector)
			}
			// The fake API server ignores field selectors: what the watcher keeps is its own filter.
			got, err := w.List()
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, p := range got {
				names = append(names, p.Namespace+"/"+p.Pod)
			}
			if !reflect.DeepEqual(names, tc.want) {
				t.Errorf("List = %v, want %v", names, tc.want)
			}
			for _, p := range []struct{ ns, name string }{{"shop", "cart-0"}, {"web", "front"}, {"batch", "job-1"}} {
				_, ok, err := w.Get(p.ns, p.name)
				if want := slices.Contains(tc.want, p.ns+"/"+p.name); ok != want || err != nil {
					t.Errorf("Get(%s/%s): ok=%v err=%v, want %v", p.ns, p.name, ok, err, want)
				}
			}
		})
	}
}

// A debug container added with `kubectl debug` to a pod with an ephemeral-storage limit writes
// into its own writable layer and logs, which the kubelet counts toward the pod: the
// informer's trimmed copy must keep its status, and the pod list its parts.
func TestPodWatcherCountsEphemeralContainers(t *testing.T) {
	client := fake.NewClientset(newPod("shop", "web-0", "uid-web").limit("main", "10Mi").
		running("main", idMain, false).debug("debugger", idDebug, true).pod)
	w, err := NewPodWatcher(client, "node-1", 0)
	if err != nil {
		t.Fatal(err)
	}
	w.SetEphemeralStorage(true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(func() { cancel(); w.Shutdown() })
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	pv, ok, err := w.Get("shop", "web-0")
	if err != nil || !ok || pv.Storage == nil {
		t.Fatalf("Get = %+v, %v, %v; want the pod with its ephemeral storage", pv, ok, err)
	}
	want := []part.Container{{Name: "main", ID: idMain, LimitBytes: ptr.To(int64(10 << 20))}, {Name: "debugger", ID: idDebug}}
	if !reflect.DeepEqual(pv.Storage.Containers, want) {
		t.Errorf("containers = %+v, want %+v", pv.Storage.Containers, want)
	}
	var parts []string
	for _, v := range pv.Parts {
		if v.Container == "debugger" {
			parts = append(parts, v.Name+" "+v.ContainerID)
		}
	}
	if wantParts := []string{"container/debugger/writable-layer " + idDebug, "container/debugger/logs "}; !reflect.DeepEqual(parts, wantParts) {
		t.Errorf("debugger's parts = %q, want %q", parts, wantParts)
	}
}
