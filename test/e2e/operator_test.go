package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"

	"github.com/emptydir-guard/emptydir-guard/deploy/deploytest"
	"github.com/emptydir-guard/emptydir-guard/remediator"
	"github.com/emptydir-guard/emptydir-guard/test/cluster"
	"github.com/emptydir-guard/emptydir-guard/test/framework"
	"github.com/emptydir-guard/emptydir-guard/test/monitoring"
)

// TestOperatorInstallEvicts is the install most users take, run for real: the README's own
// install commands, read from README.md and run with sh, beside a kube-prometheus-stack release
// at its defaults (its Prometheus selects monitors and rules labelled release=<its release name>;
// kps_test.go) and the real Prometheus Operator (pinned in test/promoperator). The
// configuration Prometheus and Alertmanager run is the one the operator generated from the
// chart's PodMonitors, PrometheusRule and AlertmanagerConfig (read from the StatefulSets and
// Secrets it made, see monitoring.StartFromOperator); nothing in this test posts a webhook. The
// seed pod must be evicted through that path, every series must carry the measured pod's
// namespace, pod and uid, and the dashboards and recording rules must work on the series
// scraped that way.
func TestOperatorInstallEvicts(t *testing.T) {
	c := sharedCluster(t)
	dir := os.Getenv(monitoring.OperatorDirEnv)
	if dir == "" {
		t.Fatalf("%s is not set: build the Prometheus Operator with test/promoperator/build.sh (make test-cluster does)", monitoring.OperatorDirEnv)
	}
	ctx, cancel := context.WithTimeout(rootCtx, 8*time.Minute)
	defer cancel()
	if err := monitoring.StartOperator(ctx, c, dir); err != nil {
		t.Fatal(err)
	}
	promBin, promVersion, err := monitoring.OperatorPrometheus(dir)
	if err != nil {
		t.Fatal(err)
	}

	// kube-prometheus-stack as its users install it, then the guard as the README installs it
	// beside it. The exporter's PodMonitor sampleLimit is the test's, checked below.
	h := newHelmTool(t, c)
	installKubePrometheusStack(ctx, t, h, promVersion)
	installed, imageRef := runReadmeInstall(ctx, t, c, h, `podMonitor:
  exporterSampleLimit: 5000
`)
	seed := installed.startSeed(ctx, t, "operator")
	// Pods that stay, for the dashboards' per-pod panels and the per-namespace rules after the
	// eviction: one near its limit (950 KiB of 1 MiB), one over it in kube-system, a namespace
	// the chart's remediator leaves alone by default (namespaceDeny).
	if err := c.EnsureNamespace(ctx, metav1.NamespaceSystem); err != nil { // its default ServiceAccount
		t.Fatal(err)
	}
	suffix := framework.RandSuffix()
	near := c.SeedPod(metav1.NamespaceSystem, "near-"+suffix)
	near.Spec.Containers[0].Command = []string{"sh", "-c", "dd if=/dev/zero of=/test/near bs=1k count=950 && exec sleep 2147483647"}
	// Its container has an ephemeral-storage limit too, far from reached, so that the pod and
	// container panels have a pod to show (request 0: this kubelet has isolation off).
	withStorageLimit(near, "10Mi")
	over := c.SeedPod(metav1.NamespaceSystem, "over-"+suffix)
	over.Spec.Containers[0].Command = []string{"sh", "-c", "dd if=/dev/zero of=/test/over bs=1k count=2048 && exec sleep 2147483647"}
	// One near its ephemeral-storage limit through its writable layer (9500 KiB of 10 MiB), for
	// the per-namespace rules counting pods and containers near their limits.
	full := c.SeedPod(metav1.NamespaceSystem, "full-"+suffix)
	full.Spec.Containers[0].Command = []string{"sh", "-c", "dd if=/dev/zero of=/fill bs=1k count=9500 && exec sleep 2147483647"}
	withStorageLimit(full, "10Mi")
	stay := framework.RunPod(ctx, t, c, near)
	kept := framework.RunPod(ctx, t, c, over)
	framework.RunPod(ctx, t, c, full)
	// A pod whose container outgrows its ephemeral-storage limit through its writable layer: the
	// DaemonSet must find the layer through its containerd mounts, and the chart's rules and
	// route carry the pod check to the remediator.
	layer := c.SeedPod(seed.labels["namespace"], "layer")
	withStorageLimit(layer, "10Mi")
	layer = framework.RunPod(ctx, t, c, layer)
	exp, rems := installed.createPods(ctx, t)
	installed.checkExporter(ctx, t, exp, seed)
	for i := range rems {
		rems[i] = deployWaitReady(ctx, t, c, rems[i])
	}
	// The kubelet pulled what the README's make push-image pushed: nothing was imported.
	requirePulled(ctx, t, c, append([]*corev1.Pod{exp}, rems...), imageRef)

	// The monitoring side, as kube-prometheus-stack sets it up.
	mon := startOperatorMonitoring(ctx, t, c, promBin, installed, rems[0])
	checkMonitoringAdmitted(ctx, t, installed, seed.labels["namespace"])

	// The exporter's PodMonitor sampleLimit reaches the scrape configuration the operator
	// generates, and (the eviction below shows it) the node's scrape stays within it.
	framework.Eventually(t, time.Minute, time.Second, "the exporter's sampleLimit in the operator's Prometheus configuration", func() (bool, string) {
		cfg, err := mon.Config(ctx)
		if err != nil {
			return false, err.Error()
		}
		return strings.Contains(cfg, "sample_limit: 5000"), "no sample_limit: 5000 in the loaded configuration"
	})

	// The alert the operator's Prometheus fires names the measured pod, not the exporter's.
	framework.Eventually(t, 2*time.Minute, time.Second, "EmptyDirOverLimit firing for the seed pod in the operator's Prometheus", func() (bool, string) {
		alerts, err := mon.PrometheusAlerts(ctx)
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, a := range alerts {
			if a.Labels["alertname"] != "EmptyDirOverLimit" {
				continue
			}
			seen = append(seen, a.Labels.String())
			if string(a.Labels["uid"]) == seed.labels["uid"] {
				return string(a.Labels["namespace"]) == seed.labels["namespace"] && string(a.Labels["pod"]) == seed.labels["pod"],
					"alert labels " + a.Labels.String()
			}
		}
		return false, fmt.Sprintf("EmptyDirOverLimit alerts: %v", seen)
	})

	// Alertmanager (its configuration generated from the chart's AlertmanagerConfig) posts to
	// the remediator, which re-measures and evicts.
	s := seed.pod
	framework.Eventually(t, 2*time.Minute, time.Second, "the seed pod is evicted through Prometheus, Alertmanager and the remediator", func() (bool, string) {
		p, err := c.Client().CoreV1().Pods(s.Namespace).Get(ctx, s.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		return p.UID != s.UID || p.DeletionTimestamp != nil, "still running; alertmanager log:\n" + c.LogTail("alertmanager", 1500)
	})
	requireEvent(ctx, t, c, s, remediator.EventEvicted)
	// Through the routing copy: at the stack's matcher strategy nothing else reaches the remediator.
	framework.Eventually(t, time.Minute, time.Second, "the seed pod's EmptyDirRemediationRoute fired in the operator's Prometheus", func() (bool, string) {
		q := fmt.Sprintf(`max_over_time(ALERTS{alertname="EmptyDirRemediationRoute", alertstate="firing", namespace=%q, pod_namespace=%q, uid=%q}[10m])`,
			installed.ns, s.Namespace, string(s.UID))
		res, err := mon.Query(ctx, q)
		if err != nil {
			return false, err.Error()
		}
		return len(res) == 1 && res[0].Value == 1, fmt.Sprintf("%s: %v", q, res)
	})

	// The writable layer, now that the chain is up: 11 MiB past a 10Mi limit.
	if _, stderr, err := c.ExecInPod(ctx, layer.Namespace, layer.Name, "test2", "dd", "if=/dev/zero", "of=/fill", "bs=1M", "count=11", "conv=fsync"); err != nil {
		t.Fatalf("writing the layer pod's writable layer: %v (%s)", err, stderr)
	}
	framework.Eventually(t, 2*time.Minute, time.Second, "the layer pod is evicted for its pod's ephemeral-storage limit", func() (bool, string) {
		p, err := c.Client().CoreV1().Pods(layer.Namespace).Get(ctx, layer.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && (p.UID != layer.UID || p.DeletionTimestamp != nil)) {
			return true, ""
		}
		res, _ := mon.Query(ctx, fmt.Sprintf(`emptydir_pod_ephemeral_storage_used_bytes{uid=%q}`, layer.UID))
		return false, fmt.Sprintf("still running; its series in the operator's Prometheus: %v", res)
	})
	requireEventSays(ctx, t, c, layer, remediator.EventEvicted, lsciPodMsg)

	// Every emptydir_* series carries the measured pod's labels: none renamed to exported_*.
	checkOperatorSeries(ctx, t, mon, seed, stay, installed.ns)
	// The remediator's own series arrive through its PodMonitor, and count this eviction.
	framework.Eventually(t, 90*time.Second, time.Second, "the remediator's evictions in the operator's Prometheus", func() (bool, string) {
		res, err := mon.Query(ctx, `sum(emptydir_remediator_alerts_total{outcome="evicted"})`)
		if err != nil {
			return false, err.Error()
		}
		return len(res) == 1 && res[0].Value >= 1, fmt.Sprintf("%v", res)
	})
	// The pod over its limit in kube-system alerts too, and is left alone.
	framework.Eventually(t, 2*time.Minute, time.Second, "the remediator skips the kube-system pod over its limit (namespace)", func() (bool, string) {
		res, err := mon.Query(ctx, `sum(emptydir_remediator_skips_total{reason="namespace"})`)
		if err != nil {
			return false, err.Error()
		}
		return len(res) == 1 && res[0].Value >= 1, fmt.Sprintf("%v", res)
	})
	if evs := framework.PodEvents(ctx, t, c, kept, remediator.EventEvicted); len(evs) != 0 {
		t.Errorf("the remediator evicted %s/%s in a namespace its policy denies: %s", kept.Namespace, kept.Name, evs[0].Message)
	}
	checkRulesHealthy(ctx, t, mon, stay.Namespace)
	checkDashboards(ctx, t, mon, map[string]string{"namespace": stay.Namespace, "pod": stay.Name}, false)
}

// startOperatorMonitoring runs what the operator made of the kube-prometheus-stack release
// (installKubePrometheusStack), Prometheus from promBin, once its output has taken in guard's
// objects, and stands in for what this cluster lacks around it (the Endpoints of the
// Alertmanager Service, the Prometheus pod's ServiceAccount token, cluster DNS).
// remediatorPod is where the remediator Service's name resolves for Alertmanager.
func startOperatorMonitoring(ctx context.Context, t *testing.T, c *cluster.Cluster, promBin string, guard *install, remediatorPod *corev1.Pod) *monitoring.Stack {
	t.Helper()
	const ns = kpsNamespace
	prom, am := kpsRelease+"-prometheus", kpsRelease+"-alertmanager"
	cs := c.Client()
	exp := int64(3600)
	tok, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, prom, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The Endpoints the endpoints controller would write for the Alertmanager Service's one
	// pod, which runs here at the node's address (no controller-manager here).
	//nolint:staticcheck // Prometheus' endpoints role (the operator's default) reads Endpoints.
	eps := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: am, Namespace: ns},
		Subsets: []corev1.EndpointSubset{{ //nolint:staticcheck // as above
			Addresses: []corev1.EndpointAddress{{IP: c.NodeIP()}},              //nolint:staticcheck // as above
			Ports:     []corev1.EndpointPort{{Name: "http-web", Port: 9093}}}}} //nolint:staticcheck // as above
	if _, err := cs.CoreV1().Endpoints(ns).Create(ctx, eps, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}

	owner := metav1.GetControllerOf(remediatorPod)
	if owner == nil {
		t.Fatalf("remediator pod %s has no controller", remediatorPod.Name)
	}
	remSvc := owner.Name // the chart names the Service like the Deployment
	amPod := "alertmanager-" + am + "-0.alertmanager-operated"
	hosts := map[string]string{
		remSvc + "." + remediatorPod.Namespace + ".svc":               remediatorPod.Status.PodIP,
		remSvc + "." + remediatorPod.Namespace + ".svc.cluster.local": remediatorPod.Status.PodIP,
		amPod:                                   c.NodeIP(),
		amPod + "." + ns + ".svc":               c.NodeIP(),
		amPod + "." + ns + ".svc.cluster.local": c.NodeIP(),
	}
	mon, err := monitoring.StartFromOperator(ctx, c, monitoring.OperatorStackOptions{
		Prometheus:                    types.NamespacedName{Namespace: ns, Name: prom},
		Alertmanager:                  types.NamespacedName{Namespace: ns, Name: am},
		PrometheusServiceAccountToken: tok.Status.Token,
		Hosts:                         hosts,
		PrometheusBin:                 promBin,
		// The chart's scrape jobs (the operator names them podMonitor/<namespace>/<name>/<n>)
		// and rules in what Prometheus loads.
		PrometheusReady: func(files string) error {
			if !strings.Contains(files, "podMonitor/"+guard.ns+"/") || !strings.Contains(files, "alert: EmptyDirOverLimit") ||
				!strings.Contains(files, "alert: EmptyDirRemediationRoute") {
				return fmt.Errorf("no scrape job of a PodMonitor in %s, or no EmptyDirOverLimit or EmptyDirRemediationRoute rule, in the operator's configuration of %s "+
					"(it selects PodMonitors and PrometheusRules labelled release=%s)", guard.ns, prom, kpsRelease)
			}
			return nil
		},
		// The chart's receiver (named <namespace>/<AlertmanagerConfig>/<receiver>), behind the
		// matcher the operator's default strategy (OnNamespace) adds: only the routing copies
		// (EmptyDirRemediationRoute) can reach it.
		AlertmanagerReady: func(files string) error {
			if !strings.Contains(files, guard.ns+"/"+guard.remediator+"/") {
				return fmt.Errorf("no receiver of the AlertmanagerConfig %s/%s in the operator's configuration of %s", guard.ns, guard.remediator, am)
			}
			if !strings.Contains(files, `namespace="`+guard.ns+`"`) {
				return fmt.Errorf("no matcher namespace=%q (the matcher strategy OnNamespace, kube-prometheus-stack's default) in the operator's configuration of %s:\n%s", guard.ns, am, files)
			}
			return reconciled(ctx, c, ns, am)
		},
	})
	if err != nil {
		t.Fatalf("%v\noperator log:\n%s", err, c.LogTail("prometheus-operator", 3000))
	}
	t.Cleanup(mon.Stop)
	return mon
}

// reconciled says whether the operator has reconciled the Alertmanager ns/name at its current
// generation (its Reconciled condition's observedGeneration).
func reconciled(ctx context.Context, c *cluster.Cluster, ns, name string) error {
	dyn, err := dynamic.NewForConfig(c.RESTConfig())
	if err != nil {
		return err
	}
	u, err := dyn.Resource(schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "alertmanagers"}).
		Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, x := range conds {
		cond, _ := x.(map[string]any)
		if cond["type"] == "Reconciled" {
			if g, _ := cond["observedGeneration"].(int64); g == u.GetGeneration() && cond["status"] == "True" {
				return nil
			}
			return fmt.Errorf("Alertmanager %s/%s: generation %d, Reconciled %v", ns, name, u.GetGeneration(), cond)
		}
	}
	return fmt.Errorf("Alertmanager %s/%s: no Reconciled condition yet", ns, name)
}

// checkOperatorSeries: the seed pod's volume series name it by namespace, pod and uid; no
// emptydir_* series has a renamed label; the exporter's own series keep its pod's labels.
func checkOperatorSeries(ctx context.Context, t *testing.T, mon *monitoring.Stack, seed seedPod, stay *corev1.Pod, guardNS string) {
	t.Helper()
	framework.Eventually(t, time.Minute, time.Second, "the staying pod's usage in the operator's Prometheus", func() (bool, string) {
		res, err := mon.Query(ctx, fmt.Sprintf(`emptydir_used_bytes{uid=%q}`, string(stay.UID)))
		if err != nil {
			return false, err.Error()
		}
		for _, r := range res {
			if r.Metric["namespace"] != stay.Namespace || r.Metric["pod"] != stay.Name || r.Metric["volume"] != "empty" {
				return false, fmt.Sprintf("series %v, want namespace %s pod %s", r.Metric, stay.Namespace, stay.Name)
			}
		}
		return len(res) == 1, fmt.Sprintf("%d series", len(res))
	})
	res, err := mon.Query(ctx, fmt.Sprintf(`last_over_time(emptydir_used_bytes{uid=%q}[10m])`, seed.labels["uid"]))
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].Metric["namespace"] != seed.labels["namespace"] || res[0].Metric["pod"] != seed.labels["pod"] {
		t.Errorf("the seed pod's usage series: %v, want one with namespace %s and pod %s", res, seed.labels["namespace"], seed.labels["pod"])
	}
	// The exporter's own series come with the rest, every exporterSlowInterval (30s), from the
	// job the chart's relabeling names <job>-slow; they keep the target's namespace (no
	// namespace/pod of their own): the exporter pod's, which the ExporterDown and collection
	// alerts need.
	framework.Eventually(t, 90*time.Second, time.Second, "the exporter's own series from the slow job", func() (bool, string) {
		self, err := mon.Query(ctx, `emptydir_exporter_pod_informer_synced`)
		if err != nil {
			return false, err.Error()
		}
		ok := len(self) > 0 && !slices.ContainsFunc(self, func(s monitoring.Sample) bool {
			return s.Metric["namespace"] != guardNS || !strings.HasSuffix(s.Metric["job"], "emptydir-exporter-slow")
		})
		return ok, fmt.Sprintf("%v, want namespace %s (its pod's) and job .../emptydir-exporter-slow", self, guardNS)
	})
	renamed, err := mon.Query(ctx, `count by (__name__) ({__name__=~"emptydir_.+", exported_namespace!=""} or {__name__=~"emptydir_.+", exported_pod!=""})`)
	if err != nil {
		t.Fatal(err)
	}
	if len(renamed) != 0 {
		t.Errorf("series with renamed labels (exported_namespace / exported_pod): %v", renamed)
	}
}

// checkRulesHealthy: every rule of the chart's PrometheusRule, as the operator loaded it,
// evaluates without error, and each per-namespace recording rule has had namespace ns during
// the test.
func checkRulesHealthy(ctx context.Context, t *testing.T, mon *monitoring.Stack, ns string) {
	t.Helper()
	const within = time.Minute
	framework.Eventually(t, within, 2*time.Second, "the recording rules produce the namespace of the pods that stay", func() (bool, string) {
		groups, err := mon.Rules(ctx)
		if err != nil {
			return false, err.Error()
		}
		var bad, missing []string
		n := 0
		for _, g := range groups {
			// A group slower than the wait (the recommendations', every 5m) may not have been
			// evaluated yet: its rules may be "unknown", never "err", and its series (which need
			// a day of history) are proven by TestRecommendRulesMatchTheMethod and promtool.
			slow := time.Duration(g.Interval*float64(time.Second)) > within
			for _, r := range g.Rules {
				var name, health, lastErr string
				switch r := r.(type) {
				case promv1.RecordingRule:
					name, health, lastErr = r.Name, string(r.Health), r.LastError
					if strings.HasPrefix(name, "namespace") && !slow {
						// At some point of the test: the over-limit count has data only
						// until the eviction.
						res, err := mon.Query(ctx, fmt.Sprintf(`last_over_time(%s{namespace=%q}[15m])`, name, ns))
						if err != nil || len(res) == 0 {
							missing = append(missing, name)
						}
					}
				case promv1.AlertingRule:
					name, health, lastErr = r.Name, string(r.Health), r.LastError
				}
				n++
				if health != "ok" && (!slow || health != "unknown") {
					bad = append(bad, fmt.Sprintf("%s/%s: %s %s", g.Name, name, health, lastErr))
				}
			}
		}
		if n == 0 {
			return false, "no rules loaded"
		}
		return len(bad) == 0 && len(missing) == 0, fmt.Sprintf("%d rules; unhealthy %v; recording rules without namespace %s: %v", n, bad, ns, missing)
	})
}

// withStorageLimit gives the pod's first container an ephemeral-storage limit, with a request
// of 0: the shared cluster's kubelet (isolation off) refuses any request of it.
func withStorageLimit(p *corev1.Pod, limit string) {
	c := &p.Spec.Containers[0]
	c.Resources.Limits = corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse(limit)}
	c.Resources.Requests = corev1.ResourceList{corev1.ResourceEphemeralStorage: resource.MustParse("0")}
}

// checkMonitoringAdmitted evaluates the NetworkPolicies the README's install made (this cluster's
// network plugin enforces none) for the pods the operator made of kube-prometheus-stack's
// Prometheus and Alertmanager, by their StatefulSets' pod labels in kpsNamespace: Prometheus
// reaches both metrics ports, Alertmanager the webhook, and a pod labelled like Prometheus in
// tenantNS reaches neither.
func checkMonitoringAdmitted(ctx context.Context, t *testing.T, in *install, tenantNS string) {
	t.Helper()
	cs := in.c.Client()
	nps, err := cs.NetworkingV1().NetworkPolicies(in.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var policies []*networkingv1.NetworkPolicy
	for i := range nps.Items {
		policies = append(policies, &nps.Items[i])
	}
	podOf := func(kind, name string) deploytest.Endpoint {
		sts, err := cs.AppsV1().StatefulSets(kpsNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("the operator's %s StatefulSet: %v", kind, err)
		}
		return deploytest.Endpoint{Namespace: kpsNamespace, Labels: sts.Spec.Template.Labels}
	}
	prom, am := podOf("Prometheus", "prometheus-"+kpsRelease+"-prometheus"), podOf("Alertmanager", "alertmanager-"+kpsRelease+"-alertmanager")
	ds, err := cs.AppsV1().DaemonSets(in.ns).Get(ctx, in.exporter, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d, err := cs.AppsV1().Deployments(in.ns).Get(ctx, in.remediator, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	expC, remC := ds.Spec.Template.Spec.Containers[0], d.Spec.Template.Spec.Containers[0]
	expPort, _ := deploytest.NamedPort(expC, "metrics")
	remPort, _ := deploytest.NamedPort(remC, "http")
	exporter := deploytest.Endpoint{Namespace: in.ns, Labels: ds.Spec.Template.Labels}
	remediatorPod := deploytest.Endpoint{Namespace: in.ns, Labels: d.Spec.Template.Labels}
	tenant := deploytest.Endpoint{Namespace: tenantNS, Labels: prom.Labels}
	for _, tc := range []struct {
		what     string
		src, dst deploytest.Endpoint
		c        corev1.Container
		port     int32
		want     bool
	}{
		{"Prometheus scrapes the exporter", prom, exporter, expC, expPort, true},
		{"Prometheus scrapes the remediator", prom, remediatorPod, remC, remPort, true},
		{"Alertmanager posts webhooks", am, remediatorPod, remC, remPort, true},
		{"a tenant's pod labelled like Prometheus to the exporter", tenant, exporter, expC, expPort, false},
		{"a tenant's pod labelled like Prometheus to the remediator", tenant, remediatorPod, remC, remPort, false},
	} {
		if got := deploytest.Admits(t, policies, tc.src, tc.dst, tc.c, tc.port); got != tc.want {
			t.Errorf("NetworkPolicies of the README's install: %s (%s %v): admitted %v, want %v", tc.what, tc.src.Namespace, tc.src.Labels, got, tc.want)
		}
	}
	if !t.Failed() {
		t.Logf("NetworkPolicies of the README's install admit kube-prometheus-stack's Prometheus and Alertmanager in namespace %s, not a tenant's look-alike", kpsNamespace)
	}
}
