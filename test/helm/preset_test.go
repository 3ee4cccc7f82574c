package helmchart_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/emptydir-guard/emptydir-guard/deploy/deploytest"
	helmchart "github.com/emptydir-guard/emptydir-guard/test/helm"
)

// presetLayout is what a preset must give the exporter: its source, --cgroup.root, and the
// node's directories it mounts (each read-only, at the same path).
type presetLayout struct {
	source, cgroupRoot string
	paths              deploytest.ExporterHostPaths
}

// containerdLayout is a node with the kubelet root, containerd's state and root dirs given and
// the pod logs at /var/log/pods.
func containerdLayout(kubeletRoot, state, root string) deploytest.ExporterHostPaths {
	return deploytest.ExporterHostPaths{Pods: kubeletRoot + "/pods", PodLogs: "/var/log/pods",
		ContainerdTasks:         state + "/io.containerd.runtime.v2.task",
		ContainerdSnapshots:     root + "/io.containerd.snapshotter.v1.overlayfs",
		ContainerdCRIContainers: root + "/io.containerd.grpc.v1.cri/containers", Cgroups: "/sys/fs/cgroup"}
}

// presetLayouts: each preset's layout as docs/deploy.md's table of distributions states it
// (written here a second time, so that a slip in the chart's table fails).
var presetLayouts = map[string]presetLayout{
	"generic":  {"filesystem", "auto", containerdLayout("/var/lib/kubelet", "/run/containerd", "/var/lib/containerd")},
	"k3s":      {"filesystem", "auto", containerdLayout("/var/lib/kubelet", "/run/k3s/containerd", "/var/lib/rancher/k3s/agent/containerd")},
	"rke2":     {"filesystem", "auto", containerdLayout("/var/lib/kubelet", "/run/k3s/containerd", "/var/lib/rancher/rke2/agent/containerd")},
	"k0s":      {"filesystem", "auto", containerdLayout("/var/lib/k0s/kubelet", "/run/k0s/containerd", "/var/lib/k0s/containerd")},
	"microk8s": {"filesystem", "auto", containerdLayout("/var/snap/microk8s/common/var/lib/kubelet", "/var/snap/microk8s/common/run/containerd", "/var/snap/microk8s/common/var/lib/containerd")},
	"kind":     {"filesystem", "/kubelet", containerdLayout("/var/lib/kubelet", "/run/containerd", "/var/lib/containerd")},
	"openshift": {"filesystem", "auto", deploytest.ExporterHostPaths{Pods: "/var/lib/kubelet/pods", PodLogs: "/var/log/pods", Cgroups: "/sys/fs/cgroup",
		Runtime: []string{"/var/lib/containers/storage/overlay-containers", "/var/lib/containers/storage/overlay-layers", "/var/lib/containers/storage/overlay"}}},
	"minikube": {"filesystem", "auto", deploytest.ExporterHostPaths{Pods: "/var/lib/kubelet/pods", PodLogs: "/var/log/pods", Cgroups: "/sys/fs/cgroup",
		Runtime: []string{"/var/lib/docker/image/overlay2/layerdb/mounts", "/var/lib/docker/overlay2"}}},
	// Autopilot admits hostPaths only under /var/log: the kubelet source, none at all.
	"gke-autopilot": {source: "kubelet"},
}

func renderValues(t *testing.T, values string) rendered {
	t.Helper()
	r := release("guard")
	if err := yaml.Unmarshal([]byte(values), &r.Values); err != nil {
		t.Fatal(err)
	}
	return render(t, r)
}

// checkLayout fails t unless the exporter of r has exactly the layout l: its source, its
// hostPaths (deploytest.CheckExporterPrivileges, which also pins capabilities, uid and RBAC),
// and the flags naming the directories and the cgroup root.
func checkPresetLayout(t *testing.T, what string, r rendered, l presetLayout) {
	t.Helper()
	deploytest.CheckExporterPrivileges(t, what, r.objs, "guard-emptydir-exporter", l.paths)
	args := deploytest.ExporterDaemonSet(t, r.objs, "guard-emptydir-exporter").Spec.Template.Spec.Containers[0].Args
	want := map[string]string{"collection.source": l.source}
	if l.source == "filesystem" {
		want["kubelet.pod-logs-dir"] = l.paths.PodLogs
		want["cgroup.root"] = l.cgroupRoot
		if l.paths.ContainerdTasks != "" {
			want["containerd.task-dir"] = l.paths.ContainerdTasks
			want["containerd.snapshotter-root"] = l.paths.ContainerdSnapshots
		}
		for _, p := range l.paths.Runtime {
			if root, ok := strings.CutSuffix(p, "/overlay"); ok {
				want["crio.storage-root"] = root
			}
			if root, ok := strings.CutSuffix(p, "/overlay2"); ok {
				want["docker.root"] = root
			}
		}
	}
	for _, f := range []string{"collection.source", "kubelet.pod-logs-dir", "cgroup.root", "containerd.task-dir", "containerd.snapshotter-root", "crio.storage-root", "docker.root"} {
		got := deploytest.ArgValues(args, f)
		if w, ok := want[f]; ok && !slices.Equal(got, []string{w}) || !ok && len(got) > 0 && f != "containerd.task-dir" && f != "containerd.snapshotter-root" {
			t.Errorf("%s: --%s %q, want %q", what, f, got, w)
		}
	}
}

// TestPresets: each preset gives the exporter its distribution's node layout (directories,
// runtime, cgroup root, source) and nothing else; gke-autopilot no hostPath at all; no preset
// set is generic, today's defaults; a value set explicitly wins over the preset, false
// included; and docs/deploy.md has a row for each.
func TestPresets(t *testing.T) {
	presets, err := helmchart.Presets(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range presets {
		if _, ok := presetLayouts[p]; !ok {
			t.Errorf("preset %s: not in presetLayouts", p)
		}
	}
	if len(presets) != len(presetLayouts) {
		t.Errorf("presets %v, presetLayouts has %d", presets, len(presetLayouts))
	}
	deployMD, err := os.ReadFile(filepath.Join(root, "docs/deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range presets {
		t.Run(p, func(t *testing.T) {
			r := renderValues(t, "preset: "+p)
			checkPresetLayout(t, "preset "+p, r, presetLayouts[p])
			if !strings.Contains(string(deployMD), "| `"+p+"` |") {
				t.Errorf("docs/deploy.md has no row | `%s` | in its table of presets", p)
			}
		})
	}
	def := deploytest.ExporterDaemonSet(t, renderValues(t, "{}").objs, "guard-emptydir-exporter")
	generic := deploytest.ExporterDaemonSet(t, renderValues(t, "preset: generic").objs, "guard-emptydir-exporter")
	if !equality.Semantic.DeepEqual(def.Spec, generic.Spec) {
		t.Error("no preset renders another exporter than preset generic")
	}

	k0s, generic0 := presetLayouts["k0s"], presetLayouts["generic"]
	for _, tc := range []struct {
		values string
		want   presetLayout
	}{
		{"{preset: k0s, exporter: {kubeletRootDir: /srv/kubelet}}", presetLayout{"filesystem", "auto",
			deploytest.ExporterHostPaths{Pods: "/srv/kubelet/pods", PodLogs: k0s.paths.PodLogs, ContainerdTasks: k0s.paths.ContainerdTasks,
				ContainerdSnapshots: k0s.paths.ContainerdSnapshots, ContainerdCRIContainers: k0s.paths.ContainerdCRIContainers, Cgroups: k0s.paths.Cgroups}}},
		{"{preset: k3s, exporter: {ephemeralStorage: {podLogsDir: /srv/logs, containerd: {root: /data/containerd}}}}", presetLayout{"filesystem", "auto",
			deploytest.ExporterHostPaths{Pods: "/var/lib/kubelet/pods", PodLogs: "/srv/logs", ContainerdTasks: "/run/k3s/containerd/io.containerd.runtime.v2.task",
				ContainerdSnapshots: "/data/containerd/io.containerd.snapshotter.v1.overlayfs", ContainerdCRIContainers: "/data/containerd/io.containerd.grpc.v1.cri/containers", Cgroups: "/sys/fs/cgroup"}}},
		// An explicit false is not the preset's true.
		{"{preset: generic, exporter: {ephemeralStorage: {containerd: {enabled: false}}}}", presetLayout{"filesystem", "auto",
			deploytest.ExporterHostPaths{Pods: "/var/lib/kubelet/pods", PodLogs: "/var/log/pods", Cgroups: "/sys/fs/cgroup"}}},
		{"{preset: openshift, exporter: {ephemeralStorage: {containerd: {enabled: true}, crio: {storageRoot: /srv/storage}}}}", presetLayout{"filesystem", "auto",
			deploytest.ExporterHostPaths{Pods: generic0.paths.Pods, PodLogs: generic0.paths.PodLogs, ContainerdTasks: generic0.paths.ContainerdTasks,
				ContainerdSnapshots: generic0.paths.ContainerdSnapshots, ContainerdCRIContainers: generic0.paths.ContainerdCRIContainers, Cgroups: "/sys/fs/cgroup",
				Runtime: []string{"/srv/storage/overlay-containers", "/srv/storage/overlay-layers", "/srv/storage/overlay"}}}},
		{"{preset: kind, exporter: {changeSignal: {cgroupRoot: auto}}}", generic0},
		{"{preset: gke-autopilot, exporter: {source: filesystem}}", generic0},
		{"{preset: minikube, exporter: {ephemeralStorage: {docker: {root: /data/docker}}}}", presetLayout{"filesystem", "auto",
			deploytest.ExporterHostPaths{Pods: "/var/lib/kubelet/pods", PodLogs: "/var/log/pods", Cgroups: "/sys/fs/cgroup",
				Runtime: []string{"/data/docker/image/overlay2/layerdb/mounts", "/data/docker/overlay2"}}}},
	} {
		t.Run(tc.values, func(t *testing.T) {
			checkPresetLayout(t, tc.values, renderValues(t, tc.values), tc.want)
		})
	}
}

// TestPresetComponentsMatchChart: the kustomize base with components/preset-<name> gives the
// exporter exactly the DaemonSet the chart renders with that preset, and the same objects, so
// that the two install paths cannot drift apart; the base itself is preset generic.
func TestPresetComponentsMatchChart(t *testing.T) {
	presets, err := helmchart.Presets(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range presets {
		t.Run(p, func(t *testing.T) {
			chart := render(t, helmchart.BaseRelease(root, map[string]any{"preset": p})).objs
			var comps []string
			if dir := helmchart.PresetComponent(p); dir != "" {
				comps = append(comps, filepath.Base(dir))
			}
			kust := kustomizeBuild(t, comps...)
			want := deploytest.MustFind[*appsv1.DaemonSet](t, chart, "emptydir-exporter")
			got := deploytest.MustFind[*appsv1.DaemonSet](t, kust, "emptydir-exporter")
			if !equality.Semantic.DeepEqual(got.Spec, want.Spec) {
				g, _ := yaml.Marshal(got.Spec.Template.Spec)
				w, _ := yaml.Marshal(want.Spec.Template.Spec)
				t.Errorf("the base with %v: its exporter DaemonSet differs from the chart's with preset %s:\n--- kustomize\n%s\n--- chart\n%s", comps, p, g, w)
			}
			kinds := func(objs []runtime.Object) []string {
				var out []string
				for _, kn := range deploytest.KindNames(objs) {
					if !strings.HasPrefix(kn, "Secret/") && !strings.HasPrefix(kn, "Namespace/") {
						out = append(out, kn)
					}
				}
				slices.Sort(out)
				return out
			}
			if g, w := kinds(kust), kinds(chart); !slices.Equal(g, w) {
				t.Errorf("the base with %v renders %v, the chart with preset %s %v", comps, g, p, w)
			}
			deploytest.CheckExporterPrivileges(t, "kustomize base + "+strings.Join(comps, ","), kust, "emptydir-exporter", presetLayouts[p].paths)
		})
	}
}
