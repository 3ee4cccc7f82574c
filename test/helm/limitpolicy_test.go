package helmchart_test

import (
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/emptydir-guard/emptydir-guard/deploy/deploytest"
	helmchart "github.com/emptydir-guard/emptydir-guard/test/helm"
)

// limitPolicy is the rendered limit policy and its binding; nils when the chart renders none.
func limitPolicy(t *testing.T, r rendered) (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	t.Helper()
	policies := deploytest.All[*admissionregistrationv1.ValidatingAdmissionPolicy](r.objs)
	bindings := deploytest.All[*admissionregistrationv1.ValidatingAdmissionPolicyBinding](r.objs)
	if len(policies) != len(bindings) || len(policies) > 1 {
		t.Fatalf("%d policies, %d bindings: want one of each or none", len(policies), len(bindings))
	}
	if len(policies) == 0 {
		return nil, nil
	}
	if bindings[0].Spec.PolicyName != policies[0].Name {
		t.Fatalf("the binding binds %q, the policy is %q", bindings[0].Spec.PolicyName, policies[0].Name)
	}
	return policies[0], bindings[0]
}

// variable is the expression of the policy's variable name.
func variable(p *admissionregistrationv1.ValidatingAdmissionPolicy, name string) string {
	for _, v := range p.Spec.Variables {
		if v.Name == name {
			return v.Expression
		}
	}
	return ""
}

// resourcesMatched are the policy's resources as group/resource, and their operations.
func resourcesMatched(p *admissionregistrationv1.ValidatingAdmissionPolicy) map[string][]admissionregistrationv1.OperationType {
	out := map[string][]admissionregistrationv1.OperationType{}
	for _, r := range p.Spec.MatchConstraints.ResourceRules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				out[g+"/"+res] = r.Operations
			}
		}
	}
	return out
}

// TestLimitPolicy: the limit policy is off by default (chart and kustomize base); on, its
// binding has the values' actions and namespaces, the policy matches pods at creation and the
// workloads' templates, and each check, the exemption and the message come from the values.
// What it admits and refuses is proven on a real API server (TestLimitPolicyOnRealAPIServer).
func TestLimitPolicy(t *testing.T) {
	with := func(v string) helmchart.Release {
		r := release("guard")
		if err := yaml.Unmarshal([]byte(v), &r.Values); err != nil {
			t.Fatal(err)
		}
		return r
	}
	for name, r := range map[string]helmchart.Release{"defaults": release("guard"), "base": helmchart.BaseRelease(root, nil)} {
		if p, _ := limitPolicy(t, render(t, r)); p != nil {
			t.Errorf("%s: the limit policy %s is rendered, want it off by default", name, p.Name)
		}
	}

	p, b := limitPolicy(t, render(t, with("limitPolicy: {enabled: true}")))
	if p == nil {
		t.Fatal("limitPolicy.enabled: no policy rendered")
	}
	if p.Name != "guard-emptydir-limits" || p.Namespace != "" || b.Namespace != "" {
		t.Errorf("policy %s/%s, binding %s/%s: want guard-emptydir-limits, cluster-wide", p.Namespace, p.Name, b.Namespace, b.Name)
	}
	if want := []admissionregistrationv1.ValidationAction{"Warn", "Audit"}; !slices.Equal(b.Spec.ValidationActions, want) {
		t.Errorf("default actions %v, want %v", b.Spec.ValidationActions, want)
	}
	wantExcluded := metav1.LabelSelectorRequirement{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"kube-system", "guard"}}
	if sel := b.Spec.MatchResources.NamespaceSelector; sel == nil || len(sel.MatchLabels) != 0 || len(sel.MatchExpressions) != 1 ||
		!equalRequirement(sel.MatchExpressions[0], wantExcluded) {
		t.Errorf("default namespaceSelector %+v, want every namespace but kube-system and the release's", sel)
	}
	matched := resourcesMatched(p)
	if ops := matched["/pods"]; !slices.Equal(ops, []admissionregistrationv1.OperationType{"CREATE"}) {
		t.Errorf("pods matched at %v, want CREATE only (an update cannot change their limits)", ops)
	}
	for _, w := range []string{"apps/deployments", "apps/replicasets", "apps/statefulsets", "apps/daemonsets", "batch/jobs", "batch/cronjobs", "/replicationcontrollers"} {
		if ops := matched[w]; !slices.Equal(ops, []admissionregistrationv1.OperationType{"CREATE", "UPDATE"}) {
			t.Errorf("%s matched at %v, want CREATE and UPDATE", w, ops)
		}
	}
	if len(matched) != 8 {
		t.Errorf("matched %v, want pods and the seven kinds with pod templates", matched)
	}
	if len(p.Spec.Validations) != 1 || !strings.Contains(p.Spec.Validations[0].MessageExpression, "see docs/policy.md") {
		t.Errorf("validations %+v, want one whose message points to docs/policy.md", p.Spec.Validations)
	}
	if e := variable(p, "exempt"); strings.Count(e, "'emptydir-guard.io/limits-policy'") != 4 || strings.Count(e, "'exempt'") != 2 {
		t.Errorf("exempt: %s, want the label and the annotation emptydir-guard.io/limits-policy=exempt", e)
	}
	if !strings.Contains(variable(p, "withoutSizeLimit"), "sizeLimit") || !strings.Contains(variable(p, "withoutEphemeralStorageLimit"), "'ephemeral-storage'") {
		t.Errorf("variables %+v, want both checks", p.Spec.Variables)
	}
	if *p.Spec.FailurePolicy != admissionregistrationv1.Fail {
		t.Errorf("failurePolicy %s", *p.Spec.FailurePolicy)
	}

	p, b = limitPolicy(t, render(t, with(`limitPolicy:
  enabled: true
  validationActions: [Deny]
  checks: {sizeLimit: false}
  workloads: false
  namespaceSelector: {matchLabels: {team: shop}, matchExpressions: [{key: tier, operator: Exists}]}
  excludedNamespaces: [kube-system, ops]
  excludeReleaseNamespace: false
  exemption: {key: example.com/no-limits, value: "yes"}
  message: "Ask the platform team's 'sizing' channel."`)))
	if !slices.Equal(b.Spec.ValidationActions, []admissionregistrationv1.ValidationAction{"Deny"}) {
		t.Errorf("actions %v, want [Deny]", b.Spec.ValidationActions)
	}
	sel := b.Spec.MatchResources.NamespaceSelector
	if sel == nil || sel.MatchLabels["team"] != "shop" || len(sel.MatchExpressions) != 2 || sel.MatchExpressions[0].Key != "tier" ||
		!equalRequirement(sel.MatchExpressions[1], metav1.LabelSelectorRequirement{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"kube-system", "ops"}}) {
		t.Errorf("namespaceSelector %+v, want the values' selector and NotIn [kube-system ops]", sel)
	}
	if matched := resourcesMatched(p); len(matched) != 1 || matched["/pods"] == nil {
		t.Errorf("workloads false: matched %v, want pods only", matched)
	}
	if e := variable(p, "withoutSizeLimit"); e != "[]" {
		t.Errorf("checks.sizeLimit false: withoutSizeLimit %q, want []", e)
	}
	if e := variable(p, "exempt"); !strings.Contains(e, "'example.com/no-limits'") || !strings.Contains(e, "'yes'") {
		t.Errorf("exempt %s, want example.com/no-limits=yes", e)
	}
	// A quote in the message is escaped in its CEL string.
	if m := p.Spec.Validations[0].MessageExpression; !strings.Contains(m, `'Ask the platform team\'s \'sizing\' channel.'`) {
		t.Errorf("messageExpression %s, want the message as a CEL string", m)
	}

	for _, tc := range []struct{ values, want string }{
		{"limitPolicy: {enabled: true, validationActions: [Deny, Warn]}", "Deny and Warn cannot go together"},
		{"limitPolicy: {enabled: true, checks: {sizeLimit: false, ephemeralStorage: false}}", "needs at least one of"},
		{"limitPolicy: {enabled: true, validationActions: [Block]}", "validationActions"},
		{"limitPolicy: {enabled: true, validationActions: []}", "validationActions"},
		{"limitPolicy: {enabled: true, exemption: {key: 'bad key', value: x}}", "key"},
		{"limitPolicy: {enabled: true, excludedNamespaces: [Kube_System]}", "excludedNamespaces"},
		{"limitPolicy: {enabled: true, namespaceSelector: {matchLabel: {a: b}}}", "matchLabel"},
	} {
		if _, err := helmchart.Render(root, with(tc.values)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("values %s: err %v, want one saying %q", tc.values, err, tc.want)
		}
	}
}

func equalRequirement(a, b metav1.LabelSelectorRequirement) bool {
	return a.Key == b.Key && a.Operator == b.Operator && slices.Equal(a.Values, b.Values)
}
