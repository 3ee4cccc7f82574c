package helmchart_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/emptydir-guard/emptydir-guard/deploy/deploytest"
	helmchart "github.com/emptydir-guard/emptydir-guard/test/helm"
)

// operatorObject is a Prometheus Operator object (Prometheus, Alertmanager) as lookup finds it.
func operatorObject(kind, ns, name string) *unstructured.Unstructured {
	o := &unstructured.Unstructured{}
	o.SetAPIVersion("monitoring.coreos.com/v1")
	o.SetKind(kind)
	o.SetNamespace(ns)
	o.SetName(name)
	return o
}

// operatorCluster serves the Prometheus Operator's API with the given objects.
func operatorCluster(objs ...*unstructured.Unstructured) *helmchart.Cluster {
	return &helmchart.Cluster{
		APIResources: []string{"monitoring.coreos.com/v1/Prometheus", "monitoring.coreos.com/v1/Alertmanager"},
		Objects:      objs,
	}
}

// TestNetworkPolicyAdmitsTheMonitoringNamespaces: the policies admit Prometheus and
// Alertmanager from the namespaces they run in, whichever those are (found at install, or
// named), and never from a namespace a tenant owns; with nothing to go on, the install fails
// and names the value to set instead of admitting nobody.
func TestNetworkPolicyAdmitsTheMonitoringNamespaces(t *testing.T) {
	promLabels := labels.Set{"app.kubernetes.io/name": "prometheus", "prometheus": "kube-prometheus-stack-prometheus"}
	amLabels := labels.Set{"app.kubernetes.io/name": "alertmanager", "alertmanager": "kube-prometheus-stack-alertmanager"}
	at := func(ns string, l labels.Set) deploytest.Endpoint {
		return deploytest.Endpoint{Namespace: ns, Labels: l}
	}

	type reach struct {
		from  deploytest.Endpoint
		scrap bool // reaches the exporter's and the remediator's metrics
		hook  bool // reaches the remediator's webhook (the same port: Alertmanager's rule)
	}
	tests := []struct {
		name    string
		values  map[string]any
		cluster *helmchart.Cluster
		reaches []reach
	}{
		{
			name:    "found at install: kube-prometheus-stack in a namespace of its own name",
			cluster: operatorCluster(operatorObject("Prometheus", "kube-prometheus-stack", "kps"), operatorObject("Alertmanager", "kube-prometheus-stack", "kps")),
			reaches: []reach{
				{from: at("kube-prometheus-stack", promLabels), scrap: true},
				{from: at("kube-prometheus-stack", amLabels), hook: true},
				{from: at("monitoring", promLabels)},
				{from: at("shop", promLabels)},
				{from: at("shop", amLabels)},
			},
		},
		{
			name: "found at install: Prometheus and Alertmanager in two namespaces, two Prometheuses",
			cluster: operatorCluster(operatorObject("Prometheus", "observability", "main"), operatorObject("Prometheus", "platform", "infra"),
				operatorObject("Alertmanager", "alerting", "main")),
			reaches: []reach{
				{from: at("observability", promLabels), scrap: true},
				{from: at("platform", promLabels), scrap: true},
				{from: at("alerting", amLabels), hook: true},
				{from: at("observability", amLabels)},
				{from: at("alerting", promLabels)},
				{from: at("shop", promLabels)},
			},
		},
		{
			name:    "named: monitoringNamespaces wins over what the cluster has",
			values:  map[string]any{"networkPolicy": map[string]any{"monitoringNamespaces": []any{"observability"}}},
			cluster: operatorCluster(operatorObject("Prometheus", "kube-prometheus-stack", "kps")),
			reaches: []reach{
				{from: at("observability", promLabels), scrap: true},
				{from: at("observability", amLabels), hook: true},
				{from: at("kube-prometheus-stack", promLabels)},
			},
		},
		{
			name:   "named without a cluster (helm template)",
			values: map[string]any{"networkPolicy": map[string]any{"monitoringNamespaces": []any{"kube-prometheus-stack"}}},
			reaches: []reach{
				{from: at("kube-prometheus-stack", promLabels), scrap: true},
				{from: at("kube-prometheus-stack", amLabels), hook: true},
				{from: at("monitoring", promLabels)},
			},
		},
		{
			name: "a peer's own namespaceSelector is kept",
			values: map[string]any{"networkPolicy": map[string]any{
				"prometheus":   map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"team": "metrics"}}},
				"alertmanager": map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"team": "metrics"}}},
			}},
			reaches: []reach{
				{from: deploytest.Endpoint{Namespace: "metrics", NamespaceLabels: labels.Set{"team": "metrics"}, Labels: promLabels}, scrap: true},
				{from: deploytest.Endpoint{Namespace: "metrics", NamespaceLabels: labels.Set{"team": "metrics"}, Labels: amLabels}, hook: true},
				{from: at("metrics", promLabels)},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := render(t, helmchart.Release{Name: "guard", Namespace: "guard", Values: tc.values, Cluster: tc.cluster})
			policies := deploytest.All[*networkingv1.NetworkPolicy](r.objs)
			if len(policies) != 2 {
				t.Fatalf("%d NetworkPolicies rendered, want the exporter's and the remediator's", len(policies))
			}
			ds := deploytest.ExporterDaemonSet(t, r.objs, "guard-emptydir-exporter")
			d := deploytest.RemediatorDeployment(t, r.objs, "guard-emptydir-remediator")
			expC, remC := ds.Spec.Template.Spec.Containers[0], d.Spec.Template.Spec.Containers[0]
			expPort, _ := deploytest.NamedPort(expC, "metrics")
			remPort, _ := deploytest.NamedPort(remC, "http")
			exporter, remediator := at("guard", ds.Spec.Template.Labels), at("guard", d.Spec.Template.Labels)
			for _, rc := range tc.reaches {
				for _, dst := range []struct {
					what string
					pod  deploytest.Endpoint
					c    corev1.Container
					port int32
					want bool
				}{
					{"the exporter's metrics", exporter, expC, expPort, rc.scrap},
					{"the remediator's port", remediator, remC, remPort, rc.scrap || rc.hook},
				} {
					if got := deploytest.Admits(t, policies, rc.from, dst.pod, dst.c, dst.port); got != dst.want {
						t.Errorf("%s %v reaches %s: %v, want %v", rc.from.Namespace, rc.from.Labels, dst.what, got, dst.want)
					}
				}
			}
		})
	}
}

// TestNetworkPolicyWithoutMonitoringNamespacesFails: with no namespace named and none found,
// the install fails and says which value to set; with the policies off it does not.
func TestNetworkPolicyWithoutMonitoringNamespacesFails(t *testing.T) {
	for name, cluster := range map[string]*helmchart.Cluster{
		"helm template":                         nil,
		"a cluster without the Operator":        {},
		"the Operator but no Prometheus object": operatorCluster(operatorObject("Alertmanager", "monitoring", "main")),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := helmchart.Render(root, helmchart.Release{Name: "guard", Namespace: "guard", Cluster: cluster})
			if err == nil || !strings.Contains(err.Error(), "Set networkPolicy.monitoringNamespaces") || !strings.Contains(err.Error(), "networkPolicy.prometheus.namespaceSelector") {
				t.Fatalf("rendered without a namespace to admit Prometheus from: err %v, want one naming networkPolicy.monitoringNamespaces", err)
			}
		})
	}
	off := helmchart.Release{Name: "guard", Namespace: "guard", Values: map[string]any{"networkPolicy": map[string]any{"enabled": false}}}
	if _, err := helmchart.Render(root, off); err != nil {
		t.Errorf("networkPolicy.enabled=false without namespaces: %v", err)
	}
}
