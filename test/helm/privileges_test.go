package helmchart_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/emptydir-guard/emptydir-guard/deploy"
	"github.com/emptydir-guard/emptydir-guard/deploy/deploytest"
	helmchart "github.com/emptydir-guard/emptydir-guard/test/helm"
)

// kustomizeBuild renders deploy/ with the given components, in this order, as a user's
// overlay does (with kustomize's packages, as kubectl kustomize would).
func kustomizeBuild(t *testing.T, components ...string) []runtime.Object {
	t.Helper()
	overlay := t.TempDir()
	deployDir, err := filepath.Abs(filepath.Join(root, "deploy"))
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(overlay, deployDir)
	if err != nil {
		t.Fatal(err)
	}
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [" + rel + "]\ncomponents:\n"
	for _, c := range components {
		k += "  - " + rel + "/components/" + c + "\n"
	}
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	opts := krusty.MakeDefaultOptions()
	// components/prometheusrule takes rules/prometheusrule.yaml from outside deploy/.
	opts.LoadRestrictions = types.LoadRestrictionsNone
	m, err := krusty.MakeKustomizer(opts).Run(filesys.MakeFsOnDisk(), overlay)
	if err != nil {
		t.Fatalf("kustomize build with %v: %v", components, err)
	}
	out, err := m.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	objs, err := deploy.Decode(out)
	if err != nil {
		t.Fatalf("decoding kustomize build with %v: %v", components, err)
	}
	return objs
}

// componentSubsets is every subset of deploy/components but the presets (one at most,
// TestPresetComponentsMatchChart), each in the order the components' comments ask for
// (kubelet-source and large-cluster after monitoring, whose PodMonitor they patch;
// large-cluster last, as it appends to the exporter's arguments that kubelet-source replaces).
func componentSubsets(t *testing.T) [][]string {
	t.Helper()
	entries, err := deploy.Files.ReadDir("components")
	if err != nil {
		t.Fatal(err)
	}
	var all []string
	patchers := []string{"kubelet-source", "large-cluster"}
	for _, e := range entries {
		if !slices.Contains(patchers, e.Name()) && !strings.HasPrefix(e.Name(), "preset-") {
			all = append(all, e.Name())
		}
	}
	all = append(all, patchers...)
	if len(all) < 5 {
		t.Fatalf("components %v: expected at least monitoring, prometheusrule, large-cluster and kubelet-source", all)
	}
	var subsets [][]string
	for mask := range 1 << len(all) {
		var s []string
		for i, c := range all {
			if mask&(1<<i) != 0 {
				s = append(s, c)
			}
		}
		subsets = append(subsets, s)
	}
	return subsets
}

// TestExporterPrivileges: every way to install the exporter — the kustomize base with every
// combination of its components, the chart with each source and each ephemeral-storage
// setting — gives it exactly what its source needs (deploytest.WantExporterPrivileges):
// read-only hostPaths (the kubelet's pods directory; the pod logs and containerd directories only
// with ephemeral storage on), capability, uid 0 and RBAC for the filesystem walk only (hostPID
// and SYS_PTRACE only with exporter.openFiles.enabled), get nodes/stats (or nodes/proxy) for
// the kubelet source only.
func TestExporterPrivileges(t *testing.T) {
	defaults := deploytest.DefaultExporterHostPaths("/var/lib/kubelet")
	for _, comps := range componentSubsets(t) {
		what := "kustomize base + [" + strings.Join(comps, ", ") + "]"
		t.Run(what, func(t *testing.T) {
			objs := kustomizeBuild(t, comps...)
			deploytest.CheckExporterPrivileges(t, what, objs, "emptydir-exporter", defaults)
		})
	}
	k0s := deploytest.ExporterHostPaths{Pods: "/var/lib/k0s/kubelet/pods", PodLogs: "/var/log/pods",
		ContainerdTasks:         "/run/k0s/containerd/io.containerd.runtime.v2.task",
		ContainerdSnapshots:     "/var/lib/k0s/containerd/io.containerd.snapshotter.v1.overlayfs",
		ContainerdCRIContainers: "/var/lib/k0s/containerd/io.containerd.grpc.v1.cri/containers", Cgroups: defaults.Cgroups}
	for _, tc := range []struct {
		values string
		paths  deploytest.ExporterHostPaths
	}{
		{"{}", defaults},
		// The change signal (on by default) adds the node's cgroups, read-only, and nothing else.
		{"exporter: {changeSignal: {enabled: false}}", deploytest.ExporterHostPaths{Pods: defaults.Pods, PodLogs: defaults.PodLogs,
			ContainerdTasks: defaults.ContainerdTasks, ContainerdSnapshots: defaults.ContainerdSnapshots, ContainerdCRIContainers: defaults.ContainerdCRIContainers}},
		// Open files (off by default) add hostPID and SYS_PTRACE (CheckExporterPrivileges reads
		// --collection.open-files from the arguments) and the cgroups, signal or not.
		{"exporter: {openFiles: {enabled: true}}", defaults},
		{"exporter: {openFiles: {enabled: true}, changeSignal: {enabled: false}}", defaults},
		{"exporter: {source: kubelet, openFiles: {enabled: true}}", deploytest.ExporterHostPaths{}},
		{"exporter: {kubeletRootDir: /var/lib/k0s/kubelet/}", deploytest.DefaultExporterHostPaths("/var/lib/k0s/kubelet")},
		{"exporter: {kubeletRootDir: /var/lib/k0s/kubelet, ephemeralStorage: {containerd: {stateDir: /run/k0s/containerd/, root: /var/lib/k0s/containerd}}}", k0s},
		{"exporter: {ephemeralStorage: {podLogsDir: /srv/pod-logs/}}", deploytest.ExporterHostPaths{Pods: defaults.Pods, PodLogs: "/srv/pod-logs",
			ContainerdTasks: defaults.ContainerdTasks, ContainerdSnapshots: defaults.ContainerdSnapshots, ContainerdCRIContainers: defaults.ContainerdCRIContainers, Cgroups: defaults.Cgroups}},
		// Image VOLUMEs off: the CRI plugin's container directory is not mounted, nothing else changes.
		{"exporter: {ephemeralStorage: {containerd: {imageVolumes: false}}}", deploytest.ExporterHostPaths{Pods: defaults.Pods, PodLogs: defaults.PodLogs,
			ContainerdTasks: defaults.ContainerdTasks, ContainerdSnapshots: defaults.ContainerdSnapshots, Cgroups: defaults.Cgroups}},
		{"exporter: {ephemeralStorage: {enabled: false}}", deploytest.ExporterHostPaths{Pods: defaults.Pods, Cgroups: defaults.Cgroups}},
		{"exporter: {ephemeralStorage: {containerd: {enabled: false}}}", deploytest.ExporterHostPaths{Pods: defaults.Pods, PodLogs: defaults.PodLogs,
			Cgroups: defaults.Cgroups}},
		// CRI-O or Docker (cri-dockerd) chosen: their records and layers, read-only.
		{"exporter: {ephemeralStorage: {containerd: {enabled: false}, crio: {enabled: true}}}", deploytest.ExporterHostPaths{Pods: defaults.Pods, PodLogs: defaults.PodLogs,
			Runtime: []string{"/var/lib/containers/storage/overlay-containers", "/var/lib/containers/storage/overlay-layers", "/var/lib/containers/storage/overlay"}, Cgroups: defaults.Cgroups}},
		{"exporter: {ephemeralStorage: {containerd: {enabled: false}, docker: {enabled: true}}}", deploytest.ExporterHostPaths{Pods: defaults.Pods, PodLogs: defaults.PodLogs,
			Runtime: []string{"/var/lib/docker/image/overlay2/layerdb/mounts", "/var/lib/docker/overlay2"}, Cgroups: defaults.Cgroups}},
		{"exporter: {source: kubelet}", deploytest.ExporterHostPaths{}},
		{"exporter: {source: kubelet, kubelet: {viaAPIServer: true}}", deploytest.ExporterHostPaths{}},
	} {
		t.Run("chart "+tc.values, func(t *testing.T) {
			r := release("guard")
			if err := yaml.Unmarshal([]byte(tc.values), &r.Values); err != nil {
				t.Fatal(err)
			}
			deploytest.CheckExporterPrivileges(t, "chart "+tc.values, render(t, r).objs, "guard-emptydir-exporter", tc.paths)
		})
	}
}

// TestKubeletSourceComponentMatchesChart: components/kubelet-source turns the base's exporter
// into exactly the DaemonSet the chart renders for exporter.source=kubelet, with the same
// RBAC, so that the two install paths cannot drift apart.
func TestKubeletSourceComponentMatchesChart(t *testing.T) {
	chart := render(t, helmchart.BaseRelease(root, map[string]any{"exporter": map[string]any{"source": "kubelet"}})).objs
	kust := kustomizeBuild(t, "kubelet-source")
	want := deploytest.MustFind[*appsv1.DaemonSet](t, chart, "emptydir-exporter")
	got := deploytest.MustFind[*appsv1.DaemonSet](t, kust, "emptydir-exporter")
	if !equality.Semantic.DeepEqual(got.Spec, want.Spec) {
		g, _ := yaml.Marshal(got.Spec.Template.Spec)
		w, _ := yaml.Marshal(want.Spec.Template.Spec)
		t.Errorf("the kubelet-source component's DaemonSet differs from the chart's:\n--- component\n%s\n--- chart\n%s", g, w)
	}
	for _, name := range []string{"ClusterRole/emptydir-exporter-kubelet", "ClusterRoleBinding/emptydir-exporter-kubelet"} {
		if !containsKindName(chart, name) || !containsKindName(kust, name) {
			t.Errorf("%s: in the chart %v, with the component %v", name, containsKindName(chart, name), containsKindName(kust, name))
		}
	}
}

func containsKindName(objs []runtime.Object, kindName string) bool {
	for _, o := range objs {
		if m, ok := o.(metav1.Object); ok && o.GetObjectKind().GroupVersionKind().Kind+"/"+m.GetName() == kindName {
			return true
		}
	}
	return false
}

// TestLargeClusterComponentMatchesChart: the kustomize base with components/monitoring and
// components/large-cluster gives the exporter's DaemonSet and PodMonitor exactly what the chart
// renders with values-large-cluster.yaml; with components/kubelet-source too, the exporter
// keeps both components' arguments.
func TestLargeClusterComponentMatchesChart(t *testing.T) {
	r := helmchart.BaseRelease(root, map[string]any{"podMonitor": map[string]any{"enabled": true}})
	r.ValuesFiles = append(r.ValuesFiles, filepath.Join(root, helmchart.LargeClusterValuesPath))
	chart := render(t, r).objs
	kust := kustomizeBuild(t, "monitoring", "large-cluster")
	want := deploytest.MustFind[*appsv1.DaemonSet](t, chart, "emptydir-exporter")
	got := deploytest.MustFind[*appsv1.DaemonSet](t, kust, "emptydir-exporter")
	if !equality.Semantic.DeepEqual(got.Spec, want.Spec) {
		t.Errorf("the large-cluster component's exporter args %q, the chart's %q", got.Spec.Template.Spec.Containers[0].Args, want.Spec.Template.Spec.Containers[0].Args)
	}
	monitor := func(objs []runtime.Object) any {
		for _, o := range objs {
			if u, ok := o.(*unstructured.Unstructured); ok && u.GetKind() == "PodMonitor" && u.GetName() == "emptydir-exporter" {
				return u.Object["spec"]
			}
		}
		t.Fatal("no PodMonitor emptydir-exporter")
		return nil
	}
	if g, w := monitor(kust), monitor(chart); !equality.Semantic.DeepEqual(g, w) {
		gy, _ := yaml.Marshal(g)
		wy, _ := yaml.Marshal(w)
		t.Errorf("the large-cluster component's PodMonitor differs from the chart's:\n--- component\n%s\n--- chart\n%s", gy, wy)
	}
	if n, _, _ := unstructured.NestedInt64(monitor(chart).(map[string]any), "sampleLimit"); n == 0 {
		t.Error("the profile renders no sampleLimit: the check compares nothing it sets")
	}

	both := deploytest.MustFind[*appsv1.DaemonSet](t, kustomizeBuild(t, "monitoring", "kubelet-source", "large-cluster"), "emptydir-exporter")
	args := both.Spec.Template.Spec.Containers[0].Args
	if !slices.Contains(args, "--collection.source=kubelet") || !slices.Contains(args, "--metric-denylist=go_.*,process_.*") {
		t.Errorf("large-cluster and kubelet-source: the exporter's args %q lack one component's", args)
	}
}
