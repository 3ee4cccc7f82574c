package exporter

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/emptydir-guard/emptydir-guard/exporter/part"
	"github.com/emptydir-guard/emptydir-guard/exporter/source"
)

func (b *podBuilder) limit(container, q string) *podBuilder {
	for i, c := range b.pod.Spec.Containers {
		if c.Name == container {
			b.pod.Spec.Containers[i].Resources.Limits = corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse(q)}
			return b
		}
	}
	b.pod.Spec.Containers = append(b.pod.Spec.Containers, corev1.Container{Name: container,
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse(q)}}})
	return b
}

// sidecar adds a restartable init container (restartable: true) or a plain one with limit q.
func (b *podBuilder) initContainer(name, q string, restartable bool) *podBuilder {
	c := corev1.Container{Name: name, Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse(q)}}}
	if restartable {
		c.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
	}
	b.pod.Spec.InitContainers = append(b.pod.Spec.InitContainers, c)
	return b
}

// running marks container name as running under runtime ID id; init puts it in the init
// containers' statuses.
func (b *podBuilder) running(name, id string, init bool) *podBuilder {
	cs := corev1.ContainerStatus{Name: name, ContainerID: id, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
	if init {
		b.pod.Status.InitContainerStatuses = append(b.pod.Status.InitContainerStatuses, cs)
	} else {
		b.pod.Status.ContainerStatuses = append(b.pod.Status.ContainerStatuses, cs)
	}
	return b
}

func (b *podBuilder) exited(name, id string) *podBuilder {
	b.pod.Status.ContainerStatuses = append(b.pod.Status.ContainerStatuses, corev1.ContainerStatus{Name: name, ContainerID: id,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}})
	return b
}

// debug adds an ephemeral container (kubectl debug) with runtime ID id, running or exited. The
// API gives ephemeral containers no resources, so it has no limit of its own.
func (b *podBuilder) debug(name, id string, running bool) *podBuilder {
	b.pod.Spec.EphemeralContainers = append(b.pod.Spec.EphemeralContainers, corev1.EphemeralContainer{
		EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: name}, TargetContainerName: "main"})
	cs := corev1.ContainerStatus{Name: name, ContainerID: id, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}}
	if running {
		cs.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	}
	b.pod.Status.EphemeralContainerStatuses = append(b.pod.Status.EphemeralContainerStatuses, cs)
	return b
}

func (b *podBuilder) runtimeClass(name string) *podBuilder {
	b.pod.Spec.RuntimeClassName = &name
	return b
}

const (
	idMain  = "containerd://" + "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	idSide  = "containerd://" + "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	idDebug = "containerd://" + "dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd"
)

func TestWithStorage(t *testing.T) {
	mib := func(n int64) *int64 { return ptr.To(n << 20) }
	type wantPart struct {
		name   string
		kind   part.Kind
		budget *int64
	}
	cases := []struct {
		name       string
		pod        *corev1.Pod
		wantLimit  *int64
		wantCtrs   []part.Container
		wantParts  []wantPart // beside the emptyDirs, in order
		wantBudget map[string]*int64
		wantClass  string // PodStorage.RuntimeClass
		none       bool   // no Storage: the pod has no ephemeral-storage limit
	}{
		{name: "no limit: emptyDirs only", pod: newPod("a", "p", "u1").emptyDir("v", "", "1Mi").mount("v").running("main", idMain, false).pod, none: true},
		{name: "container limit: writable layer, logs, pod files; disk emptyDir without sizeLimit is guarded by the pod limit",
			pod:       newPod("a", "p", "u1").limit("main", "10Mi").emptyDir("scratch", "", "").emptyDir("shm", corev1.StorageMediumMemory, "").mount("scratch", "shm").running("main", idMain, false).pod,
			wantLimit: mib(10),
			wantCtrs:  []part.Container{{Name: "main", ID: idMain, LimitBytes: mib(10)}},
			wantParts: []wantPart{
				{"container/main/writable-layer", part.KindWritableLayer, mib(10)},
				{"container/main/logs", part.KindContainerLogs, mib(10)},
				{"pod/files", part.KindPodFiles, mib(10)},
			},
			wantBudget: map[string]*int64{"scratch": mib(10), "shm": nil}},
		{name: "limits add up; a container without one is guarded by the pod's; exited containers do not count",
			pod: newPod("a", "p", "u1").limit("main", "10Mi").limit("helper", "0").configMap("cfg").
				initContainer("side", "5Mi", true).initContainer("setup", "50Mi", false).
				running("main", idMain, false).running("side", idSide, true).exited("old", "containerd://cc").pod,
			// PodLimits: the plain init container runs beside the sidecar started before it, so
			// max(10Mi + 5Mi, 50Mi + 5Mi).
			wantLimit: mib(55),
			wantCtrs:  []part.Container{{Name: "side", ID: idSide, LimitBytes: mib(5)}, {Name: "main", ID: idMain, LimitBytes: mib(10)}},
			wantParts: []wantPart{
				{"configmap/cfg", part.KindConfigMap, mib(55)},
				{"container/side/writable-layer", part.KindWritableLayer, mib(5)},
				{"container/side/logs", part.KindContainerLogs, mib(5)},
				{"container/main/writable-layer", part.KindWritableLayer, mib(10)},
				{"container/main/logs", part.KindContainerLogs, mib(10)},
				{"pod/files", part.KindPodFiles, mib(55)},
			}},
		// The kubelet counts every running container of the sandbox toward the pod
		// (ListContainers in cri_stats_provider.go makes no difference for ephemeral ones), and
		// checks a container limit only of regular and restartable init containers.
		{name: "a running ephemeral container's layer and logs count toward the pod's limit, under no limit of their own",
			pod: newPod("a", "p", "u1").limit("main", "10Mi").running("main", idMain, false).debug("debugger", idDebug, true).debug("gone", "containerd://ee", false).
				runtimeClass("kata-qemu").pod,
			wantLimit: mib(10),
			wantClass: "kata-qemu",
			wantCtrs:  []part.Container{{Name: "main", ID: idMain, LimitBytes: mib(10)}, {Name: "debugger", ID: idDebug}},
			wantParts: []wantPart{
				{"container/main/writable-layer", part.KindWritableLayer, mib(10)},
				{"container/main/logs", part.KindContainerLogs, mib(10)},
				{"container/debugger/writable-layer", part.KindWritableLayer, mib(10)},
				{"container/debugger/logs", part.KindContainerLogs, mib(10)},
				{"pod/files", part.KindPodFiles, mib(10)},
			}},
		// Its RuntimeClass is known all the same: the change signal reads no mark of a sandbox's
		// pod (Config.ChangeSignalRuntimeClasses).
		{name: "an ephemeral container alone gives a pod without limits none",
			pod: newPod("a", "p", "u1").emptyDir("v", "", "1Mi").mount("v").running("main", idMain, false).debug("debugger", idDebug, true).
				runtimeClass("kata").pod, none: true, wantClass: "kata"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			base, ok := podBase(tc.pod)
			if !ok {
				t.Fatal("podBase refused the pod")
			}
			if base.RuntimeClass != tc.wantClass {
				t.Errorf("the pod's runtime class = %q, want %q", base.RuntimeClass, tc.wantClass)
			}
			emptyDirs := len(base.Parts)
			got := withStorage(base, tc.pod)
			if tc.none {
				if got.Storage != nil || len(got.Parts) != emptyDirs {
					t.Fatalf("Storage = %+v, %d volumes; want none and the %d emptyDirs", got.Storage, len(got.Parts), emptyDirs)
				}
				return
			}
			if got.Storage == nil {
				t.Fatal("Storage is nil")
			}
			if !reflect.DeepEqual(got.Storage.LimitBytes, tc.wantLimit) {
				t.Errorf("pod limit = %v, want %v", deref64(got.Storage.LimitBytes), deref64(tc.wantLimit))
			}
			if got.Storage.RuntimeClass != tc.wantClass {
				t.Errorf("runtime class = %q, want %q", got.Storage.RuntimeClass, tc.wantClass)
			}
			if !reflect.DeepEqual(got.Storage.Containers, tc.wantCtrs) {
				t.Errorf("containers = %+v, want %+v", got.Storage.Containers, tc.wantCtrs)
			}
			var parts []wantPart
			for _, v := range got.Parts[emptyDirs:] {
				parts = append(parts, wantPart{v.Name, v.Kind, v.BudgetBytes})
			}
			if !reflect.DeepEqual(parts, tc.wantParts) {
				t.Errorf("parts:\n got %s\nwant %s", describeParts(parts), describeParts(tc.wantParts))
			}
			for _, v := range got.Parts[:emptyDirs] {
				if want, ok := tc.wantBudget[v.Name]; ok && !reflect.DeepEqual(v.BudgetBytes, want) {
					t.Errorf("emptyDir %s budget = %v, want %v", v.Name, deref64(v.BudgetBytes), deref64(want))
				}
			}
		})
	}
}

func describeParts[P any](parts []P) string {
	var b strings.Builder
	for _, p := range parts {
		// Fields by reflect.Value, never Interface: the tests' part types have unexported ones.
		v := reflect.ValueOf(p)
		var budget any
		if f := v.Field(2); !f.IsNil() {
			budget = f.Elem().Int()
		}
		fmt.Fprintf(&b, "{%v %v %v} ", v.Field(0), v.Field(1), budget)
	}
	return b.String()
}

func deref64(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

func TestStorageUsage(t *testing.T) {
	mib := int64(1 << 20)
	pv := part.Pod{UID: "u", Parts: []part.Part{
		{Name: "scratch", Medium: part.MediumDisk},
		{Name: "shm", Medium: part.MediumMemory},
		{Name: "configmap/cfg", Kind: part.KindConfigMap},
		{Name: "container/main/writable-layer", Kind: part.KindWritableLayer, Container: "main"},
		{Name: "container/main/logs", Kind: part.KindContainerLogs, Container: "main"},
		{Name: "container/side/writable-layer", Kind: part.KindWritableLayer, Container: "side"},
		{Name: "container/side/logs", Kind: part.KindContainerLogs, Container: "side"},
		{Name: "pod/files", Kind: part.KindPodFiles},
	}, Storage: &part.PodStorage{LimitBytes: ptr.To(20 * mib), Containers: []part.Container{{Name: "main", LimitBytes: ptr.To(10 * mib)}, {Name: "side"}}}}
	ok := func(used int64) part.Result {
		return part.Result{Measurement: part.Measurement{UsedBytes: used}}
	}
	results := map[string]part.Result{
		"scratch":                       ok(3 * mib),
		"shm":                           ok(50 * mib), // memory: no ephemeral storage
		"configmap/cfg":                 ok(8192),
		"container/main/writable-layer": ok(11 * mib),
		"container/main/logs":           ok(mib),
		"container/side/writable-layer": {Measurement: part.Measurement{Unlocated: source.LayerNotOverlay}},
		"container/side/logs":           ok(4096),
		"pod/files":                     ok(4096),
	}
	u := storageUsage(pv, results, false, false)
	wantParts := map[string]int64{part.LabelEmptyDir: 3 * mib, part.LabelWritableLayer: 11 * mib, part.LabelLogs: mib + 4096, part.LabelOther: 8192 + 4096}
	if !reflect.DeepEqual(u.Parts, wantParts) {
		t.Errorf("parts = %v, want %v", u.Parts, wantParts)
	}
	if want := 15*mib + 4*4096; u.UsedBytes != want {
		t.Errorf("used = %d, want %d", u.UsedBytes, want)
	}
	if !u.LowerBound {
		t.Error("an unlocated writable layer must make the pod's usage a lower bound")
	}
	main, side := u.Containers[0], u.Containers[1]
	if main.UsedBytes != 12*mib || main.LowerBound || main.WritableLayerBytes != 11*mib || main.LogsBytes != mib {
		t.Errorf("main = %+v, want 12Mi used (layer 11Mi + logs 1Mi), complete", main)
	}
	if side.UsedBytes != 4096 || !side.LowerBound || side.Unlocated != source.LayerNotOverlay {
		t.Errorf("side = %+v, want 4096 used, a lower bound, unlocated not_overlay", side)
	}

	// A dedicated image filesystem: layers count toward the pod only.
	u = storageUsage(pv, results, true, false)
	if main := u.Containers[0]; main.UsedBytes != mib || main.WritableLayerBytes != 11*mib {
		t.Errorf("dedicated image fs: main = %+v, want logs only (1Mi) and the layer still shown", main)
	}
	if side := u.Containers[1]; side.LowerBound {
		t.Error("dedicated image fs: a layer that does not count cannot make the container a lower bound")
	}
	if u.UsedBytes != 15*mib+4*4096 {
		t.Errorf("dedicated image fs: pod used = %d, want the layers still counted", u.UsedBytes)
	}

	// A layer's figure from the kubelet's Summary counts on the dashboards, never in a live
	// answer, which decides evictions: there it is 0 and the usage a lower bound.
	results["container/side/writable-layer"] = part.Result{Measurement: part.Measurement{UsedBytes: 5 * mib, Unlocated: source.LayerOtherRuntime, Method: part.MethodKubelet}}
	if u := storageUsage(pv, results, false, false); u.UsedBytes != 20*mib+4*4096 || !u.LowerBound {
		t.Errorf("published: used %d, lower bound %v; want the kubelet's 5Mi counted, still a lower bound", u.UsedBytes, u.LowerBound)
	}
	if u := storageUsage(pv, results, false, true); u.UsedBytes != 15*mib+4*4096 || !u.LowerBound || u.Containers[1].UsedBytes != 4096 {
		t.Errorf("live: used %d, side %d, lower bound %v; want the kubelet's figure left out", u.UsedBytes, u.Containers[1].UsedBytes, u.LowerBound)
	}
	results["container/side/writable-layer"] = part.Result{Measurement: part.Measurement{Unlocated: source.LayerNotOverlay}}

	// A part not measured yet makes the pod a lower bound, not an undercount taken for exact.
	delete(results, "pod/files")
	if u := storageUsage(pv, results, false, false); !u.LowerBound || u.Parts[part.LabelOther] != 8192 {
		t.Errorf("missing part: lower bound %v, other %d; want a lower bound without it", u.LowerBound, u.Parts[part.LabelOther])
	}
}
