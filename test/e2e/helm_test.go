package e2e

import (
	"context"
	"errors"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/emptydir-guard/emptydir-guard/deploy"
	"github.com/emptydir-guard/emptydir-guard/exporter"
	"github.com/emptydir-guard/emptydir-guard/test/cluster"
	"github.com/emptydir-guard/emptydir-guard/test/framework"
)

// helmTemplate renders the chart (deploy/helm/emptydir-guard) with `helm template`, Helm
// being the pinned tool of the test/helm module (`go tool helm`), and decodes the objects.
// Without a cluster to look in, the monitoring namespaces are given, as any GitOps user gives them.
func helmTemplate(t *testing.T, release, ns, values string) []runtime.Object {
	t.Helper()
	dir := t.TempDir()
	nf, vf := filepath.Join(dir, "monitoring.yaml"), filepath.Join(dir, "values.yaml")
	if err := os.WriteFile(nf, []byte("networkPolicy:\n  monitoringNamespaces: [monitoring]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(vf, []byte(values), 0o644); err != nil {
		t.Fatal(err)
	}
	chart, err := filepath.Abs("../../deploy/helm/emptydir-guard")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "tool", "helm", "template", release, chart, "--namespace", ns, "--values", nf, "--values", vf)
	cmd.Dir = "../helm"
	cmd.Env = append(os.Environ(), helmHomeEnv(t.TempDir())...)
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("helm template: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("helm template: %v", err)
	}
	objs, err := deploy.Decode(out)
	if err != nil {
		t.Fatalf("decoding helm template's output: %v", err)
	}
	return objs
}

// helmHomeEnv keeps Helm's own state (cache, configuration, registry credentials) in dir.
func helmHomeEnv(dir string) []string {
	return []string{"HELM_CACHE_HOME=" + filepath.Join(dir, "cache"), "HELM_CONFIG_HOME=" + filepath.Join(dir, "config"),
		"HELM_DATA_HOME=" + filepath.Join(dir, "data")}
}

// TestHelmChartOnRealCluster renders the Helm chart for a release whose name differs from the
// chart's (so every name, label selector and RBAC subject comes from the templates, none
// coincides with the kustomize base's), applies it to the real API server, and runs the same
// checks as the kustomize base's test: the exporter and remediator pods from the project's
// image under the chart's ServiceAccounts and RBAC, the SubjectAccessReviews, leader election,
// the chart-generated webhook token, and the seed pod's eviction through them; and that the
// exporter pod, through the chart's mounts and privileges, counts an image VOLUME directory
// (checkImageVolumeCounted).
//
// Through values, not patches: the image, its pull policy and the kubelet root. Patched,
// because this cluster has no kube-proxy: the API server address (deployAPIEnv).
//
// With two exporter options off by default (TestOperatorInstallEvicts keeps the defaults):
// exporter.projectQuota.enabled, so the exporter runs with SYS_ADMIN and --fs.project-quota
// under the real kubelet and containerd; this node has no project quotas (its kernel lacks
// them, and the seed pod shares the host's users), so the volume is walked, at du's bytes, and
// says so (the kernel lane proves the quota reads themselves, docs/kernel-lane.md). And
// exporter.metricDenylist, whose families /metrics then leaves out. And the calibration on the
// exporter's own pod at the chart's default cgroupRoot (auto): no mismatch, and the layout it
// found is this cluster's.
func TestHelmChartOnRealCluster(t *testing.T) {
	c := sharedCluster(t)
	ctx, cancel := context.WithTimeout(rootCtx, 5*time.Minute)
	defer cancel()

	in, objs := chartInstall(t, c, "guard", "helm-guard", `
  changeSignal: {enabled: true}
  projectQuota: {enabled: true}
  metricDenylist: ['go_.*', 'process_.*']
  metricOptInList: [emptydir_measurement_info]`, "")
	installed := installObjects(ctx, t, c, in, objs, deployAPIEnv(t, c))
	seed := installed.startSeed(ctx, t, "helm")
	exp, rems := installed.createPods(ctx, t)
	exp = installed.checkExporter(ctx, t, exp, seed)
	checkChartOptions(ctx, t, c, exp, seed)
	checkLayout(ctx, t, c, exp) // every path right, the cgroup root found (cgroupRoot: auto)
	checkImageVolumeCounted(ctx, t, c, deployExporterURL(exp))
	installed.evictSeed(ctx, t, rems, seed)
}

// checkChartOptions checks that the exporter pod runs the quota path's settings and, on a node
// without project quotas, publishes the seed volume as walked (emptydir_measurement_info,
// opted in); and that no denied family, and no opt-in family not opted in, is exposed.
func checkChartOptions(ctx context.Context, t *testing.T, c *cluster.Cluster, pod *corev1.Pod, seed seedPod) {
	t.Helper()
	ctr := pod.Spec.Containers[0]
	if !slices.Contains(ctr.Args, "--fs.project-quota") || ctr.SecurityContext == nil || ctr.SecurityContext.Capabilities == nil ||
		!slices.Contains(ctr.SecurityContext.Capabilities.Add, "SYS_ADMIN") {
		t.Fatalf("exporter.projectQuota.enabled: the exporter runs with args %q and security context %+v, want --fs.project-quota and SYS_ADMIN",
			ctr.Args, ctr.SecurityContext)
	}
	fams, err := framework.Scrape(ctx, c, deployExporterURL(pod)+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	walked := maps.Clone(seed.labels)
	walked["method"] = "walk"
	if v, ok := framework.Sample(fams, "emptydir_measurement_info", walked); !ok || v != 1 {
		t.Errorf("the seed volume on a node without project quotas: emptydir_measurement_info{method=\"walk\"} %v (found %v), want 1", v, ok)
	}
	for name := range fams {
		if name != "emptydir_measurement_info" && slices.Contains(exporter.OptInFamilies, name) {
			t.Errorf("exporter.metricOptInList [emptydir_measurement_info]: /metrics exposes the opt-in family %s", name)
		}
		if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") {
			t.Errorf("exporter.metricDenylist [go_.*, process_.*]: /metrics exposes %s", name)
		}
	}
}

// chartInstall renders the chart for release in ns with this cluster's image, kubelet root,
// pod logs and containerd directories, and two remediator replicas, plus exporterValues (YAML
// lines indented under exporter:) and extraValues (YAML appended to those), and reads the webhook
// token the chart generated.
func chartInstall(t *testing.T, c *cluster.Cluster, release, ns, exporterValues, extraValues string) (install, []runtime.Object) {
	t.Helper()
	objs := helmTemplate(t, release, ns, `
image:
  repository: localhost/emptydir-guard
  tag: test
  pullPolicy: Never
`+nodeValues(c, exporterValues, "")+extraValues)
	in := install{ns: ns, exporter: release + "-emptydir-exporter", remediator: release + "-emptydir-remediator"}
	for _, o := range objs {
		if s, ok := o.(*corev1.Secret); ok && s.Name == in.remediator+"-webhook" {
			in.token = string(s.Data["token"])
		}
	}
	if len(in.token) < 32 {
		t.Fatalf("the chart generated no webhook token Secret (token %q)", in.token)
	}
	return in, objs
}

// nodeValues are the chart values this cluster's node needs: its kubelet root, pod logs and
// containerd directories, its kubelet's cgroup root and driver for the change signal (unless
// exporterValues sets changeSignal itself), and two remediator replicas; plus exporterValues and
// remediatorValues (YAML lines indented under exporter: and remediator:).
func nodeValues(c *cluster.Cluster, exporterValues, remediatorValues string) string {
	if !strings.Contains(exporterValues, "changeSignal:") {
		exporterValues = "\n  changeSignal: {cgroupRoot: " + c.CgroupRoot() + ", cgroupDriver: cgroupfs}" + exporterValues
	}
	return `exporter:
  kubeletRootDir: ` + c.KubeletRootDir() + `
  ephemeralStorage:
    podLogsDir: ` + c.PodLogsDir() + `
    containerd:
      stateDir: ` + c.ContainerdStateDir() + `
      root: ` + c.ContainerdRoot() + exporterValues + `
remediator:
  replicas: 2` + remediatorValues + `
`
}
