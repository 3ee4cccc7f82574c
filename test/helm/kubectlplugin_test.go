package helmchart_test

import (
	"slices"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/emptydir-guard/emptydir-guard/deploy/deploytest"
)

// TestKubectlPluginRBAC: kubectlPlugin.rbac renders the plugin's Role in the release namespace
// with exactly list pods and get pods/proxy, bound to the subjects given; apiServerPeers adds
// the exporter's third ingress rule; by default there is none of them.
func TestKubectlPluginRBAC(t *testing.T) {
	r := release("guard")
	if err := yaml.Unmarshal([]byte(`
kubectlPlugin:
  rbac:
    enabled: true
    subjects: [{kind: Group, name: platform, apiGroup: rbac.authorization.k8s.io}]
  apiServerPeers: [{ipBlock: {cidr: 10.0.0.10/32}}]
`), &r.Values); err != nil {
		t.Fatal(err)
	}
	got := render(t, r)
	const name = "guard-emptydir-exporter-kubectl-plugin"
	role := find[*rbacv1.Role](got, name)
	if role == nil || role.Namespace != "guard" {
		t.Fatalf("Role %s in guard: %+v", name, role)
	}
	want := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}},
		{APIGroups: []string{""}, Resources: []string{"pods/proxy"}, Verbs: []string{"get"}},
	}
	if !slices.EqualFunc(role.Rules, want, func(a, b rbacv1.PolicyRule) bool {
		return slices.Equal(a.APIGroups, b.APIGroups) && slices.Equal(a.Resources, b.Resources) && slices.Equal(a.Verbs, b.Verbs) &&
			len(a.ResourceNames) == 0 && len(a.NonResourceURLs) == 0
	}) {
		t.Errorf("Role rules %+v, want %+v", role.Rules, want)
	}
	rb := find[*rbacv1.RoleBinding](got, name)
	if rb == nil || rb.Namespace != "guard" || rb.RoleRef.Kind != "Role" || rb.RoleRef.Name != name ||
		len(rb.Subjects) != 1 || rb.Subjects[0].Kind != "Group" || rb.Subjects[0].Name != "platform" {
		t.Errorf("RoleBinding %s: %+v", name, rb)
	}
	np := find[*networkingv1.NetworkPolicy](got, "guard-emptydir-exporter")
	if np == nil || len(np.Spec.Ingress) != 3 || len(np.Spec.Ingress[2].From) != 1 || np.Spec.Ingress[2].From[0].IPBlock == nil ||
		np.Spec.Ingress[2].From[0].IPBlock.CIDR != "10.0.0.10/32" || np.Spec.Ingress[2].Ports[0].Port.StrVal != "metrics" {
		t.Errorf("exporter NetworkPolicy with apiServerPeers: %+v", np)
	}

	def := deploytest.KindNames(render(t, release("guard")).objs)
	for _, k := range []string{"Role/" + name, "RoleBinding/" + name} {
		if slices.Contains(def, k) {
			t.Errorf("%s rendered by default", k)
		}
	}
	if np := find[*networkingv1.NetworkPolicy](render(t, release("guard")), "guard-emptydir-exporter"); np == nil || len(np.Spec.Ingress) != 2 {
		t.Errorf("default exporter NetworkPolicy: %+v, want its two rules", np)
	}
}
