package deploy_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/kustomize/api/types"

	"github.com/emptydir-guard/emptydir-guard/deploy"
	"github.com/emptydir-guard/emptydir-guard/deploy/deploytest"
)

func TestNetworkPolicies(t *testing.T) {
	m := loadBase(t)
	policies := deploytest.All[*networkingv1.NetworkPolicy](m.objs)
	ds, d := deploytest.ExporterDaemonSet(t, m.objs, "emptydir-exporter"), deploytest.RemediatorDeployment(t, m.objs, "emptydir-remediator")
	expC, remC := ds.Spec.Template.Spec.Containers[0], d.Spec.Template.Spec.Containers[0]
	expPort, _ := deploytest.NamedPort(expC, "metrics")
	remPort, _ := deploytest.NamedPort(remC, "http")
	exporterPod := deploytest.Endpoint{Namespace: deploy.Namespace, Labels: ds.Spec.Template.Labels}
	remediatorPod := deploytest.Endpoint{Namespace: deploy.Namespace, Labels: d.Spec.Template.Labels}
	// As the Prometheus Operator labels its pods, in the namespace docs/deploy.md assumes.
	prometheus := deploytest.Endpoint{Namespace: "monitoring", Labels: labels.Set{"app.kubernetes.io/name": "prometheus", "prometheus": "k8s"}}
	alertmanager := deploytest.Endpoint{Namespace: "monitoring", Labels: labels.Set{"app.kubernetes.io/name": "alertmanager", "alertmanager": "main"}}
	tenant := deploytest.Endpoint{Namespace: "shop", Labels: labels.Set{"app": "cart"}}

	// The remediator dials the exporter on --exporter.port: that is the port the policy opens.
	if v, _ := deploytest.ArgValue(remC.Args, "exporter.port"); v != "9731" || expPort != 9731 {
		t.Fatalf("remediator dials --exporter.port=%s, exporter serves %d: this test assumes 9731 for both", v, expPort)
	}

	tests := []struct {
		name string
		src  deploytest.Endpoint
		dst  deploytest.Endpoint
		c    corev1.Container
		port int32
		want bool
	}{
		{"remediator re-checks on the exporter", remediatorPod, exporterPod, expC, expPort, true},
		{"Prometheus scrapes the exporter", prometheus, exporterPod, expC, expPort, true},
		{"Prometheus scrapes the remediator", prometheus, remediatorPod, remC, remPort, true},
		{"Alertmanager delivers webhooks", alertmanager, remediatorPod, remC, remPort, true},
		{"a standby forwards a webhook to the leader", remediatorPod, remediatorPod, remC, remPort, true},

		{"any tenant pod to the exporter", tenant, exporterPod, expC, expPort, false},
		{"any tenant pod to the webhook", tenant, remediatorPod, remC, remPort, false},
		{"a tenant pod labelled like Prometheus", deploytest.Endpoint{Namespace: "shop", Labels: prometheus.Labels}, exporterPod, expC, expPort, false},
		{"a tenant pod labelled like the remediator", deploytest.Endpoint{Namespace: "shop", Labels: remediatorPod.Labels}, exporterPod, expC, expPort, false},
		{"a tenant pod labelled like the remediator to the webhook", deploytest.Endpoint{Namespace: "shop", Labels: remediatorPod.Labels}, remediatorPod, remC, remPort, false},
		{"a tenant pod labelled like Alertmanager", deploytest.Endpoint{Namespace: "shop", Labels: alertmanager.Labels}, remediatorPod, remC, remPort, false},
		{"another pod of the monitoring namespace", deploytest.Endpoint{Namespace: "monitoring", Labels: labels.Set{"app.kubernetes.io/name": "grafana"}}, exporterPod, expC, expPort, false},
		{"Alertmanager to the exporter", alertmanager, exporterPod, expC, expPort, false},
		// The exporters' notices (remediator.notices), which a TokenReview authenticates.
		{"the exporters' notices to the remediator", exporterPod, remediatorPod, remC, remPort, true},
		{"a tenant pod labelled like the exporter to the remediator", deploytest.Endpoint{Namespace: "shop", Labels: exporterPod.Labels}, remediatorPod, remC, remPort, false},
		{"remediator to another exporter port", remediatorPod, exporterPod, expC, expPort + 1, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := deploytest.Admits(t, policies, tc.src, tc.dst, tc.c, tc.port); got != tc.want {
				t.Errorf("admitted: %v, want %v", got, tc.want)
			}
		})
	}

	// Each policy selects exactly its workload's pods.
	for _, np := range policies {
		s, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		if err != nil || s.Empty() {
			t.Fatalf("%s: empty or bad pod selector (%v) would isolate the whole namespace", np.Name, err)
		}
		want := map[string]labels.Set{"emptydir-exporter": exporterPod.Labels, "emptydir-remediator": remediatorPod.Labels}[np.Name]
		for name, l := range map[string]labels.Set{"exporter": exporterPod.Labels, "remediator": remediatorPod.Labels} {
			if s.Matches(l) != (labels.Equals(l, want)) {
				t.Errorf("NetworkPolicy %s selects the %s pods: %v", np.Name, name, s.Matches(l))
			}
		}
	}
}

// TestNetworkPolicyPatchInDocs renders the overlay docs/deploy.md shows for other monitoring
// peers and checks that it moves the admitted peers and nothing else.
func TestNetworkPolicyPatchInDocs(t *testing.T) {
	doc, err := os.ReadFile("../docs/deploy.md")
	if err != nil {
		t.Fatal(err)
	}
	const marker = "# my-overlay/kustomization.yaml — network peers\n"
	_, rest, ok := strings.Cut(string(doc), marker)
	if !ok {
		t.Fatalf("docs/deploy.md has no block starting with %q", marker)
	}
	overlay, _, _ := strings.Cut(rest, "```")
	deployDir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rel, err := filepath.Rel(dir, deployDir)
	if err != nil {
		t.Fatal(err)
	}
	overlay = strings.Replace(overlay, "resources: [../deploy]", "resources: ["+rel+"]", 1)
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(overlay), 0o644); err != nil {
		t.Fatal(err)
	}
	rendered := manifests{kustomize(t, dir, types.LoadRestrictionsRootOnly)}
	policies := deploytest.All[*networkingv1.NetworkPolicy](rendered.objs)
	ds, d := deploytest.ExporterDaemonSet(t, rendered.objs, "emptydir-exporter"), deploytest.RemediatorDeployment(t, rendered.objs, "emptydir-remediator")
	expC, remC := ds.Spec.Template.Spec.Containers[0], d.Spec.Template.Spec.Containers[0]
	exporterPod := deploytest.Endpoint{Namespace: deploy.Namespace, Labels: ds.Spec.Template.Labels}
	remediatorPod := deploytest.Endpoint{Namespace: deploy.Namespace, Labels: d.Spec.Template.Labels}
	theirPrometheus := deploytest.Endpoint{Namespace: "observability", Labels: labels.Set{"app": "prometheus-server"}}
	theirAlertmanager := deploytest.Endpoint{Namespace: "observability", Labels: labels.Set{"app": "alertmanager"}}
	operatorPrometheus := deploytest.Endpoint{Namespace: "monitoring", Labels: labels.Set{"app.kubernetes.io/name": "prometheus"}}

	for _, tc := range []struct {
		name     string
		src, dst deploytest.Endpoint
		c        corev1.Container
		port     int32
		want     bool
	}{
		{"patched Prometheus scrapes the exporter", theirPrometheus, exporterPod, expC, 9731, true},
		{"patched Prometheus scrapes the remediator", theirPrometheus, remediatorPod, remC, 9732, true},
		{"patched Alertmanager delivers webhooks", theirAlertmanager, remediatorPod, remC, 9732, true},
		{"the remediator rule is untouched", remediatorPod, exporterPod, expC, 9731, true},
		{"the default Prometheus peer is gone", operatorPrometheus, exporterPod, expC, 9731, false},
		{"patched Alertmanager still not on the exporter", theirAlertmanager, exporterPod, expC, 9731, false},
	} {
		if got := deploytest.Admits(t, policies, tc.src, tc.dst, tc.c, tc.port); got != tc.want {
			t.Errorf("%s: admitted %v, want %v", tc.name, got, tc.want)
		}
	}
}
