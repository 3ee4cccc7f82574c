package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	kplugin "github.com/emptydir-guard/emptydir-guard/internal/plugin"
	"github.com/emptydir-guard/emptydir-guard/internal/recommend"
	"github.com/emptydir-guard/emptydir-guard/internal/testbin"
	"github.com/emptydir-guard/emptydir-guard/test/cluster"
	"github.com/emptydir-guard/emptydir-guard/test/framework"
	"github.com/emptydir-guard/emptydir-guard/test/monitoring"
)

// Addresses inside the cluster's namespace of TestRecommend (other tests use 1973x-1980x).
const (
	recommendExporterAddr   = "127.0.0.1:19811"
	recommendPrometheusAddr = "127.0.0.1:19812"
	recommendAlertAddr      = "127.0.0.1:19813"
)

// recommendHash is the pod-template-hash of Deployment web's ReplicaSet: no controller manager
// runs, so the test makes the ReplicaSet and its pods as the Deployment controller would.
const recommendHash = "6b8f9d7c5"

// webPod is a pod of Deployment web's ReplicaSet rs, writing mib MiB into its disk emptyDir
// cache (no sizeLimit) at start; its container app has an ephemeral-storage limit of 1Gi (and
// a request of 0, which a node without local storage capacity isolation admits), so that the
// exporter measures the container too.

// recommendStep is the resolution of the points TestRecommend asks for (--step).
const recommendStep = 30 * time.Second

func webPod(c *cluster.Cluster, rs *appsv1.ReplicaSet, name string, mib int) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: rs.Namespace, Name: name,
			Labels: map[string]string{"app": "web", "pod-template-hash": recommendHash},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
		Spec: webTemplate(),
	}
	p.Spec.NodeName = c.NodeName()
	p.Spec.Containers[0].Command = []string{"sh", "-c",
		fmt.Sprintf("dd if=/dev/zero of=/cache/data bs=1M count=%d && echo written && exec sleep 2147483647", mib)}
	return p
}

// webTemplate is the pod spec of Deployment web.
func webTemplate() corev1.PodSpec {
	return corev1.PodSpec{
		TerminationGracePeriodSeconds: ptr.To[int64](0),
		Containers: []corev1.Container{{
			Name: "app", Image: cluster.BusyboxImage, ImagePullPolicy: corev1.PullNever,
			Command:      []string{"sleep", "2147483647"},
			VolumeMounts: []corev1.VolumeMount{{Name: "cache", MountPath: "/cache"}},
			Resources: corev1.ResourceRequirements{
				Limits:   corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("1Gi")},
				Requests: corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("0")},
			},
		}},
		Volumes: []corev1.Volume{{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
	}
}

// TestRecommend runs `kubectl emptydir recommend` as a user runs it (kubectl finding the plugin
// on PATH, the user's kubeconfig, a Prometheus URL) against a Deployment whose pods write
// what the test chooses: two replicas (30 and 50 MiB), one replaced by a pod of another name
// (60 MiB). The recreated pods pool into the Deployment: the suggested sizeLimit is
// Round(60MiB × 1.3) = 80Mi from the largest, three pods seen, and the container's limit is
// raised to cover what its pod holds in the emptyDir. -o patch prints a kubectl patch that,
// run, sets those values into the Deployment's template.
func TestRecommend(t *testing.T) {
	plugin := testbin.Path(t, "kubectl-emptydir")
	exporterBin := testbin.Path(t, "emptydir-exporter")
	c := sharedCluster(t)
	ctx, cancel := context.WithTimeout(rootCtx, 15*time.Minute)
	defer cancel()
	ns := framework.Namespace(ctx, t, c, "rec")

	framework.StartInNetns(t, c, "rec-exporter-"+ns, exporterBin, append(c.ExporterPathArgs(),
		"--node.name="+c.NodeName(), "--kubeconfig="+c.KubeconfigPath(), "--collection.interval=5s",
		"--collection.unlimited-interval=5s", "--web.listen-address="+recommendExporterAddr)...)
	// No rules: recommend then reads the exporter's series (its source auto falls back), as
	// it does where the recording rules are not installed; TestRecommendRulesMatchTheMethod
	// (internal/recommend) proves the rules' numbers the same.
	mon, err := monitoring.Start(ctx, c, monitoring.Options{
		ExporterTargets: []string{recommendExporterAddr}, WebhookURL: "http://127.0.0.1:1/webhook",
		PrometheusAddr: recommendPrometheusAddr, AlertmanagerAddr: recommendAlertAddr, ScrapeInterval: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mon.Stop)

	apps := c.Client().AppsV1()
	d, err := apps.Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web", Labels: map[string]string{"app": "web"}},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}, Spec: webTemplate()}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rs, err := apps.ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-" + recommendHash,
			Labels:          map[string]string{"app": "web", "pod-template-hash": recommendHash},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name, UID: d.UID, Controller: ptr.To(true)}}},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"pod-template-hash": recommendHash}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web", "pod-template-hash": recommendHash}}, Spec: webTemplate()}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// measured waits until Prometheus holds the pod's emptyDir at its written size, and its
	// workload.
	measured := func(p *corev1.Pod, mib int) time.Time {
		t.Helper()
		var at time.Time
		framework.Eventually(t, 2*time.Minute, 2*time.Second, p.Name+" measured in Prometheus", func() (bool, string) {
			q := fmt.Sprintf(`emptydir_used_bytes{uid=%q, volume="cache"} >= %d and on (uid) emptydir_pod_workload_info{workload_kind="Deployment", workload="web"}`, p.UID, mib<<20)
			res, err := mon.Query(ctx, q)
			if err != nil || len(res) == 0 {
				return false, fmt.Sprintf("%s: %v", q, err)
			}
			at = res[0].Time
			return true, ""
		})
		return at
	}
	a := framework.RunPod(ctx, t, c, webPod(c, rs, "web-"+recommendHash+"-aaaaa", 30))
	b := framework.RunPod(ctx, t, c, webPod(c, rs, "web-"+recommendHash+"-bbbbb", 50))
	measured(a, 30)
	measured(b, 50)
	zero := int64(0)
	if err := c.Client().CoreV1().Pods(ns).Delete(ctx, a.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	recreated := framework.RunPod(ctx, t, c, webPod(c, rs, "web-"+recommendHash+"-ccccc", 60))
	last := measured(recreated, 60)
	// Every point of the pooled series is a step at a multiple of the step (--step: 30s here,
	// from the exporter's series, rather than the rules' 5m, to keep the test short): wait for
	// the step that holds the recreated pod's usage to end and its samples to be scraped.
	step := last.Truncate(recommendStep).Add(recommendStep)
	t.Logf("waiting %s for the %s step ending %s", time.Until(step.Add(10*time.Second)).Round(time.Second), recommendStep, step.Format(time.TimeOnly))
	select {
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	case <-time.After(time.Until(step.Add(10 * time.Second))):
	}

	// What Prometheus holds: the largest usage of the three pods, the expected peak.
	res, err := mon.Query(ctx, fmt.Sprintf(`max(max_over_time(emptydir_used_bytes{namespace=%q, volume="cache"}[30m]))`, ns))
	if err != nil || len(res) != 1 {
		t.Fatalf("peak: %v %v", res, err)
	}
	peak := res[0].Value
	if peak < 60<<20 || peak > 61<<20 {
		t.Fatalf("the largest usage in Prometheus is %v bytes, want 60MiB and the directory's blocks", peak)
	}

	// The user's shell: kubectl and the plugin on PATH, the kubeconfig in KUBECONFIG.
	pathDir := t.TempDir()
	if err := os.Symlink(plugin, filepath.Join(pathDir, "kubectl-emptydir")); err != nil {
		t.Fatal(err)
	}
	path := pathDir + ":" + os.Getenv("PATH")
	if dir := os.Getenv("K8S_BIN_DIR"); dir != "" {
		path = pathDir + ":" + dir + ":" + os.Getenv("PATH")
	}
	user := func(args ...string) string {
		t.Helper()
		cmd := c.Command(ctx, args[0], args[1:]...)
		cmd.Env = append(os.Environ(), "PATH="+path, "KUBECONFIG="+c.KubeconfigPath())
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
		}
		return string(out)
	}
	rec := []string{"kubectl", "emptydir", "recommend", "-n", ns, "--prometheus-url", mon.PrometheusURL(), "--window", "30m", "--step", recommendStep.String(), "--min-history", recommendStep.String()}

	// top from the same Prometheus: the recreated pod against its pod limit, the deleted one gone.
	var top kplugin.UsageList
	if err := json.Unmarshal([]byte(user("kubectl", "emptydir", "top", "-n", ns, "--prometheus-url", mon.PrometheusURL(), "-o", "json")), &top); err != nil {
		t.Fatal(err)
	}
	var podRow *kplugin.Usage
	for i, u := range top.Items {
		if u.UID == string(a.UID) {
			t.Errorf("top --prometheus-url lists the deleted pod %s: %+v", a.Name, u)
		}
		if u.UID == string(recreated.UID) && u.Kind == kplugin.KindPod {
			podRow = &top.Items[i]
		}
	}
	if top.Source != kplugin.SourcePrometheus || podRow == nil || podRow.UsedBytes < 60<<20 || podRow.UsedBytes > 62<<20 ||
		podRow.LimitBytes == nil || *podRow.LimitBytes != 1<<30 {
		t.Errorf("top --prometheus-url: source %q, the recreated pod's row %+v; want its 60 MiB (and a few blocks) against its 1Gi limit", top.Source, podRow)
	}

	table := user(rec...)
	t.Logf("kubectl emptydir recommend:\n%s", table)
	var list struct{ Items []recommend.Suggestion }
	if err := json.Unmarshal([]byte(user(append(rec, "-o", "json", "-l", "app=web")...)), &list); err != nil {
		t.Fatal(err)
	}
	got := map[string]recommend.Suggestion{}
	for _, s := range list.Items {
		if s.WorkloadKind != "Deployment" || s.Workload != "web" {
			t.Errorf("-l app=web gave %s/%s", s.WorkloadKind, s.Workload)
		}
		got[string(s.Kind)+"/"+s.Name] = s
	}
	cache, app, pod := got["volume/cache"], got["container/app"], got["pod/"]
	wantLimit := recommend.Round(peak * 1.3)
	if cache.Peak != peak || cache.Limit != wantLimit || recommend.Format(cache.Limit) != "80Mi" || cache.Pods != 3 ||
		cache.Current != nil || cache.HistorySeconds < recommendStep.Seconds() || cache.Insufficient != "" {
		t.Errorf("volume cache: %+v; want the peak %v, limit %s (80Mi), 3 pods, no current sizeLimit, at least a step of history",
			cache, peak, recommend.Format(wantLimit))
	}
	// The container writes nothing but a line of log: the least values, but its pod holds the
	// emptyDir's 60MiB against the sum of its containers' limits: the one container's limit
	// covers the pod's.
	if app.Current == nil || *app.Current != 1<<30 || recommend.Format(app.Request) != "16Mi" ||
		!app.RaisedForPod || app.Limit < pod.Limit || pod.Limit < wantLimit {
		t.Errorf("container app: %+v (current %v), pod %+v; want current 1Gi, request 16Mi, limit raised to the pod's (at least %s)",
			app, app.Current, pod, recommend.Format(wantLimit))
	}
	for _, want := range []string{"deployment/web   volume/cache", "<none>    -         80Mi", "raised to cover the pod's emptyDirs"} {
		if !strings.Contains(table, want) {
			t.Errorf("the table lacks %q", want)
		}
	}

	// The patch, run as printed, sets the suggestions into the Deployment's template.
	patches := user(append(rec, "-o", "patch")...)
	t.Logf("kubectl emptydir recommend -o patch:\n%s", patches)
	if !strings.Contains(patches, "kubectl patch deployment web -n "+ns+" --type strategic -p ") {
		t.Fatalf("no patch of deployment web")
	}
	user("sh", "-euc", patches)
	d, err = apps.Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	spec := d.Spec.Template.Spec
	if got := spec.Volumes[0].EmptyDir.SizeLimit; got == nil || got.String() != "80Mi" {
		t.Errorf("the patched template's sizeLimit is %v, want 80Mi", got)
	}
	res0 := spec.Containers[0].Resources
	if res0.Limits.StorageEphemeral().Value() != int64(app.Limit) || res0.Requests.StorageEphemeral().String() != "16Mi" || len(spec.Containers) != 1 {
		t.Errorf("the patched template's container: %+v, want limit %s request 16Mi", res0, recommend.Format(app.Limit))
	}
}
