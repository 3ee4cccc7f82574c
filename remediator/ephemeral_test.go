package remediator

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"

	"github.com/emptydir-guard/emptydir-guard/exporter"
	"github.com/emptydir-guard/emptydir-guard/exporter/exportertest"
	"github.com/emptydir-guard/emptydir-guard/exporter/part"
	"github.com/emptydir-guard/emptydir-guard/exporter/source"
	"github.com/emptydir-guard/emptydir-guard/internal/liveapi"
)

// container adds a container with an ephemeral-storage limit q ("" for none); sidecar makes it
// a restartable init container, init a plain one.
func (b *podBuilder) container(name, q, kind string) *podBuilder {
	c := corev1.Container{Name: name}
	if q != "" {
		c.Resources.Limits = corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse(q)}
	}
	switch kind {
	case "sidecar":
		c.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
		fallthrough
	case "init":
		b.pod.Spec.InitContainers = append(b.pod.Spec.InitContainers, c)
	default:
		b.pod.Spec.Containers = append(b.pod.Spec.Containers, c)
	}
	return b
}

func (b *podBuilder) memoryVolume() *podBuilder {
	b.pod.Spec.Volumes[0].EmptyDir.Medium = corev1.StorageMediumMemory
	return b
}

func firingCheck(ns, pod, uid, check, container string) Alert {
	a := firing(ns, pod, uid)
	delete(a.Labels, LabelVolume)
	a.Labels["alertname"] = map[string]string{CheckPod: "PodEphemeralStorageOverLimit", CheckContainer: "ContainerEphemeralStorageOverLimit"}[check]
	a.Labels[LabelCheck] = check
	if container != "" {
		a.Labels[LabelContainer] = container
	}
	return a
}

// The pod's and a container's ephemeral-storage limits are enforced as an emptyDir's sizeLimit
// is: the limit from the pod's current spec as the kubelet computes it, a live re-check of the
// right subject, and the kubelet's own words in the Event.
func TestEphemeralStorageChecks(t *testing.T) {
	tests := []struct {
		name       string
		pod        *corev1.Pod
		alert      Alert
		used       int64
		wantOut    Outcome
		wantReason string
		wantAsked  *Subject // nil: nothing measured
		wantEvent  string   // a substring of the one Event, "" for none
	}{
		{name: "pod over the containers' limits added up",
			pod:   newPod("default", "job", uid1).container("app", "6Mi", "").container("log", "4Mi", "").build(),
			alert: firingCheck("default", "job", uid1, CheckPod, ""), used: 11 * mib,
			wantOut: OutcomeEvicted, wantAsked: &Subject{Check: CheckPod},
			wantEvent: "Evicted: Pod ephemeral local storage usage exceeds the total limit of containers 10Mi. the pod's ephemeral storage uses 11Mi"},
		{name: "pod under its limit",
			pod:   newPod("default", "job", uid1).container("app", "10Mi", "").build(),
			alert: firingCheck("default", "job", uid1, CheckPod, ""), used: 9 * mib,
			wantOut: OutcomeSkipped, wantReason: SkipNotOverLimit, wantAsked: &Subject{Check: CheckPod}},
		{name: "pod without any ephemeral-storage limit: nothing measured",
			pod:   newPod("default", "job", uid1).container("app", "", "").build(),
			alert: firingCheck("default", "job", uid1, CheckPod, ""), used: 100 * mib,
			wantOut: OutcomeSkipped, wantReason: SkipNotOverLimit},
		{name: "container over its limit",
			pod:   newPod("default", "job", uid1).container("app", "10Mi", "").build(),
			alert: firingCheck("default", "job", uid1, CheckContainer, "app"), used: 11 * mib,
			wantOut: OutcomeEvicted, wantAsked: &Subject{Check: CheckContainer, Container: "app"},
			wantEvent: `Evicted: Container app exceeded its local ephemeral storage limit "10Mi". the ephemeral storage of container "app" uses 11Mi`},
		{name: "restartable init container over its limit",
			pod:   newPod("default", "job", uid1).container("app", "", "").container("proxy", "10Mi", "sidecar").build(),
			alert: firingCheck("default", "job", uid1, CheckContainer, "proxy"), used: 11 * mib,
			wantOut: OutcomeEvicted, wantAsked: &Subject{Check: CheckContainer, Container: "proxy"},
			wantEvent: `Container proxy exceeded its local ephemeral storage limit "10Mi".`},
		{name: "a plain init container is not checked by the kubelet",
			pod:   newPod("default", "job", uid1).container("app", "", "").container("setup", "10Mi", "init").build(),
			alert: firingCheck("default", "job", uid1, CheckContainer, "setup"), used: 11 * mib,
			wantOut: OutcomeSkipped, wantReason: SkipNotOverLimit},
		{name: "container without a limit",
			pod:   newPod("default", "job", uid1).container("app", "", "").build(),
			alert: firingCheck("default", "job", uid1, CheckContainer, "app"), used: 11 * mib,
			wantOut: OutcomeSkipped, wantReason: SkipNotOverLimit},
		{name: "emptyDir still by the kubelet's words",
			pod:   newPod("default", "job", uid1).build(),
			alert: firing("default", "job", uid1), used: 10 * mib,
			wantOut: OutcomeEvicted, wantAsked: &Subject{Check: CheckEmptyDir, Volume: "empty"},
			wantEvent: `Evicted: Usage of EmptyDir volume "empty" exceeds the limit "1Mi". emptyDir volume "empty" uses 10Mi`},
		{name: "a memory volume over its spec's sizeLimit: the kernel enforces its tmpfs",
			pod:   newPod("default", "job", uid1).memoryVolume().build(),
			alert: firing("default", "job", uid1), used: 10 * mib,
			wantOut: OutcomeSkipped, wantReason: SkipNotOverLimit},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, testConfig(), tt.pod)
			e.measurer.used[uid1] = tt.used
			code, resp := e.post(payloadJSON(t, tt.alert))
			if code != http.StatusOK || len(resp.Alerts) != 1 {
				t.Fatalf("code %d, %+v", code, resp)
			}
			got := resp.Alerts[0]
			if got.Outcome != tt.wantOut || got.Reason != tt.wantReason {
				t.Errorf("outcome/reason = %s/%q, want %s/%q (%s)", got.Outcome, got.Reason, tt.wantOut, tt.wantReason, got.Message)
			}
			switch {
			case tt.wantAsked == nil && len(e.measurer.asked) > 0:
				t.Errorf("measured %v, want nothing measured", e.measurer.asked)
			case tt.wantAsked != nil && (len(e.measurer.asked) != 1 || e.measurer.asked[0] != *tt.wantAsked):
				t.Errorf("measured %v, want %v", e.measurer.asked, *tt.wantAsked)
			}
			events := e.events()
			switch {
			case tt.wantEvent == "" && len(events) > 0:
				t.Errorf("unexpected events %q", events)
			case tt.wantEvent != "" && (len(events) != 1 || !strings.Contains(events[0], tt.wantEvent)):
				t.Errorf("events = %q, want one containing %q", events, tt.wantEvent)
			}
			if tt.wantOut == OutcomeEvicted {
				ev := lastEviction(t, e)
				if r := ev.Annotations[EvictionReasonAnnotation]; !strings.HasPrefix(r, kubeletMessage(tt.alert.Target().Subject(), mustLimit(t, tt.pod, tt.alert))) {
					t.Errorf("eviction reason %q does not start with the kubelet's message", r)
				}
			}
		})
	}
}

func mustLimit(t *testing.T, pod *corev1.Pod, a Alert) int64 {
	t.Helper()
	l, ok, why := subjectLimit(pod, a.Target().Subject())
	if !ok {
		t.Fatal(why)
	}
	return l
}

func TestCheckLabelValidation(t *testing.T) {
	tests := []struct {
		name    string
		alert   Alert
		wantErr string
	}{
		{name: "pod check needs no volume", alert: firingCheck("default", "job", uid1, CheckPod, "")},
		{name: "container check", alert: firingCheck("default", "job", uid1, CheckContainer, "app")},
		{name: "container check without container", alert: firingCheck("default", "job", uid1, CheckContainer, ""), wantErr: "container"},
		{name: "container name not a DNS label", alert: firingCheck("default", "job", uid1, CheckContainer, "../x"), wantErr: "container"},
		{name: "unknown check", alert: func() Alert { a := firing("default", "job", uid1); a.Labels[LabelCheck] = "node"; return a }(), wantErr: "check"},
		{name: "emptydir check needs its volume", alert: func() Alert {
			a := firingCheck("default", "job", uid1, CheckPod, "")
			a.Labels[LabelCheck] = CheckEmptyDir
			return a
		}(), wantErr: "volume"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := validateAlert(tt.alert)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("validateAlert: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("validateAlert = %v, want an error naming %q", err, tt.wantErr)
			}
		})
	}
}

// The remediator's ExporterMeasurer reads the pod's and a container's ephemeral storage from
// the exporter's own live handler, in process: one contract.
func TestExporterMeasurerEphemeralStorage(t *testing.T) {
	at := time.Now().Add(-time.Second).Truncate(time.Millisecond)
	mib64 := int64(mib)
	pv := part.Pod{Namespace: "default", Pod: "job", UID: uid1, Parts: []part.Part{
		{Name: "scratch", Medium: part.MediumDisk},
		{Name: "container/app/writable-layer", Kind: part.KindWritableLayer, Container: "app"},
		{Name: "container/app/logs", Kind: part.KindContainerLogs, Container: "app"},
		{Name: "container/side/writable-layer", Kind: part.KindWritableLayer, Container: "side"},
		{Name: "container/side/logs", Kind: part.KindContainerLogs, Container: "side"},
	}, Storage: &part.PodStorage{LimitBytes: ptr.To(20 * mib64), Containers: []part.Container{{Name: "app", LimitBytes: ptr.To(10 * mib64)}, {Name: "side"}}}}
	table := exportertest.NewTable()
	for name, used := range map[string]int64{"scratch": 2 * mib64, "container/app/writable-layer": 11 * mib64, "container/app/logs": mib64, "container/side/logs": 4096} {
		table.Set(uid1, name, part.Measurement{UsedBytes: used, MeasuredAt: at, CompletedAt: at})
	}
	table.Set(uid1, "container/side/writable-layer", part.Measurement{Unlocated: source.LayerOtherRuntime, MeasuredAt: at, CompletedAt: at})
	cfg := exporter.DefaultConfig()
	cfg.NodeName, cfg.Source, cfg.Pods = "node-1", exportertest.NewSource(table.Measure), exportertest.NewPods(pv)
	exp, err := exporter.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(liveapi.Pattern, exp.LiveHandler())
	ts := httptest.NewServer(mux)
	defer ts.Close()
	m := NewExporterMeasurer(ts.Client(), StaticLocator(ts.URL))
	pod := newPod("default", "job", uid1).build()

	got, err := m.Measure(t.Context(), pod, Subject{Check: CheckPod})
	if err != nil || got.UsedBytes != 14*mib64+4096 || !got.LowerBound() || !got.MeasuredAt.Equal(at) || !got.IncompleteSince.Equal(at) {
		t.Errorf("pod: %+v, %v; want 14Mi+4096 (emptyDir, layer, logs), a lower bound (a layer not located) since and measured at %s", got, err, at)
	}
	got, err = m.Measure(t.Context(), pod, Subject{Check: CheckContainer, Container: "app"})
	if err != nil || got.UsedBytes != 12*mib64 || got.LowerBound() || !got.IncompleteSince.IsZero() {
		t.Errorf("container app: %+v, %v; want 12Mi (layer and logs), exact", got, err)
	}
	got, err = m.Measure(t.Context(), pod, Subject{Check: CheckContainer, Container: "side"})
	if err != nil || !got.LowerBound() || got.Unlocated != source.LayerOtherRuntime || !strings.Contains(got.incompleteWhy(), source.LayerOtherRuntime) || !got.IncompleteSince.Equal(at) {
		t.Errorf("container side: %+v, %v; want a lower bound since %s saying its layer was not located", got, err, at)
	}
	_, err = m.Measure(t.Context(), pod, Subject{Check: CheckContainer, Container: "gone"})
	assertMeasurement(t, Measurement{}, err, 0, MeasureNotFound)
}

func TestKubeletContainerSummary(t *testing.T) {
	at := metav1.NewTime(testNow.Add(-5 * time.Second))
	older := metav1.NewTime(testNow.Add(-9 * time.Second))
	u := func(n uint64) *uint64 { return &n }
	ps := statsapi.PodStats{PodRef: statsapi.PodReference{Namespace: "default", Name: "job", UID: uid1}, Containers: []statsapi.ContainerStats{{Name: "app",
		Rootfs: &statsapi.FsStats{Time: older, UsedBytes: u(11 * mib)},
		Logs:   &statsapi.FsStats{Time: at, UsedBytes: u(mib)}}}}
	shared := &statsapi.Summary{Node: statsapi.NodeStats{NodeName: "node-1",
		Fs:      &statsapi.FsStats{CapacityBytes: u(100), AvailableBytes: u(40), Inodes: u(9)},
		Runtime: &statsapi.RuntimeStats{ImageFs: &statsapi.FsStats{CapacityBytes: u(100), AvailableBytes: u(40), Inodes: u(9)}}}}
	got, err := containerSummary(shared, ps, Subject{Check: CheckContainer, Container: "app"})
	if err != nil || got.UsedBytes != 12*mib || !got.MeasuredAt.Equal(older.Time) {
		t.Errorf("shared image fs: %+v, %v; want logs + layer, 12Mi, as old as the older part", got, err)
	}
	dedicated := *shared
	dedicated.Node.Runtime = &statsapi.RuntimeStats{ImageFs: &statsapi.FsStats{CapacityBytes: u(500), AvailableBytes: u(40), Inodes: u(9)}}
	got, err = containerSummary(&dedicated, ps, Subject{Check: CheckContainer, Container: "app"})
	if err != nil || got.UsedBytes != mib {
		t.Errorf("dedicated image fs: %+v, %v; want the logs only, 1Mi", got, err)
	}
	_, err = containerSummary(shared, ps, Subject{Check: CheckContainer, Container: "other"})
	assertMeasurement(t, Measurement{}, err, 0, MeasureNotFound)
}

// A debug container (`kubectl debug`) has no limit, yet the kubelet counts its writable layer
// and logs toward its pod's: the live re-check of PodEphemeralStorageOverLimit must too, from
// the pod as the exporter's informer holds it, or a tenant allowed to debug its own pod writes
// past the limit unseen.
func TestExporterMeasurerCountsEphemeralContainers(t *testing.T) {
	const idApp, idDebug = "containerd://" + "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
		"containerd://" + "dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd"
	pod := newPod("default", "job", uid1).container("app", "10Mi", "").build()
	pod.Spec.Volumes = nil
	pod.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debugger"}, TargetContainerName: "app"}}
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", ContainerID: idApp, State: running}}
	pod.Status.EphemeralContainerStatuses = []corev1.ContainerStatus{{Name: "debugger", ContainerID: idDebug, State: running}}

	watcher, err := exporter.NewPodWatcher(fake.NewClientset(pod), "node-1", 0)
	if err != nil {
		t.Fatal(err)
	}
	watcher.SetEphemeralStorage(true)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer func() { cancel(); watcher.Shutdown() }()
	if err := watcher.Start(ctx); err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(-time.Second).Truncate(time.Millisecond)
	table := exportertest.NewTable()
	for name, used := range map[string]int64{"container/app/writable-layer": mib, "container/app/logs": 4096, "pod/files": 4096,
		"container/debugger/writable-layer": 20 * mib, "container/debugger/logs": 8192} {
		table.Set(uid1, name, part.Measurement{UsedBytes: used, MeasuredAt: at, CompletedAt: at})
	}
	cfg := exporter.DefaultConfig()
	cfg.NodeName, cfg.Source, cfg.Pods = "node-1", exportertest.NewSource(table.Measure), watcher
	exp, err := exporter.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(liveapi.Pattern, exp.LiveHandler())
	ts := httptest.NewServer(mux)
	defer ts.Close()

	got, err := NewExporterMeasurer(ts.Client(), StaticLocator(ts.URL)).Measure(t.Context(), pod, Subject{Check: CheckPod})
	if want := int64(21*mib + 3*4096 + 4096); err != nil || got.UsedBytes != want || got.LowerBound() {
		t.Errorf("pod: %+v, %v; want %d bytes (the debug container's 20Mi layer and logs included), exact", got, err, want)
	}
	if limit, ok, _ := subjectLimit(pod, Subject{Check: CheckPod}); !ok || got.UsedBytes <= limit {
		t.Errorf("limit %d (ok=%v), usage %d: want the pod over its limit, as the kubelet sees it", limit, ok, got.UsedBytes)
	}
}
