package deploytest_test

import (
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/emptydir-guard/emptydir-guard/deploy/deploytest"
)

func clusterRole(name string, rules ...rbacv1.PolicyRule) *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
}

func role(ns, name string, rules ...rbacv1.PolicyRule) *rbacv1.Role {
	return &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: rules}
}

func clusterBinding(kind, name string, subjects ...rbacv1.Subject) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: name}, Subjects: subjects}
}

func binding(ns, kind, name string, subjects ...rbacv1.Subject) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: name}, Subjects: subjects}
}

func sa(ns, name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}
}

func rule(groups, resources, verbs []string, names ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: groups, Resources: resources, Verbs: verbs, ResourceNames: names}
}

func named(a authorizationv1.ResourceAttributes, name string) authorizationv1.ResourceAttributes {
	a.Name = name
	return a
}

func TestAllowed(t *testing.T) {
	core := []string{""}
	getPods := rule(core, []string{"pods"}, []string{"get"})
	me := sa("guard", "rem")
	p := deploytest.Perm
	for _, tc := range []struct {
		name string
		objs []runtime.Object
		ask  authorizationv1.ResourceAttributes
		want bool
	}{
		{"ClusterRoleBinding: cluster-wide", []runtime.Object{clusterRole("r", getPods), clusterBinding("ClusterRole", "r", me)}, p("", "", "pods", "get"), true},
		{"ClusterRoleBinding: in any namespace", []runtime.Object{clusterRole("r", getPods), clusterBinding("ClusterRole", "r", me)}, p("other", "", "pods", "get"), true},
		{"another verb", []runtime.Object{clusterRole("r", getPods), clusterBinding("ClusterRole", "r", me)}, p("", "", "pods", "list"), false},
		{"another group", []runtime.Object{clusterRole("r", getPods), clusterBinding("ClusterRole", "r", me)}, p("", "apps", "pods", "get"), false},
		{"another resource", []runtime.Object{clusterRole("r", getPods), clusterBinding("ClusterRole", "r", me)}, p("", "", "secrets", "get"), false},
		{"a ClusterRoleBinding cannot bind a Role", []runtime.Object{role("guard", "r", getPods), clusterBinding("Role", "r", me)}, p("guard", "", "pods", "get"), false},
		{"a binding to a missing role", []runtime.Object{clusterBinding("ClusterRole", "r", me)}, p("", "", "pods", "get"), false},
		{"RoleBinding: its namespace", []runtime.Object{role("guard", "r", getPods), binding("guard", "Role", "r", me)}, p("guard", "", "pods", "get"), true},
		{"RoleBinding: not cluster-wide", []runtime.Object{role("guard", "r", getPods), binding("guard", "Role", "r", me)}, p("", "", "pods", "get"), false},
		{"RoleBinding: not another namespace", []runtime.Object{role("guard", "r", getPods), binding("guard", "Role", "r", me)}, p("other", "", "pods", "get"), false},
		{"RoleBinding to a Role of another namespace", []runtime.Object{role("other", "r", getPods), binding("guard", "Role", "r", me)}, p("guard", "", "pods", "get"), false},
		{"RoleBinding to a ClusterRole: its namespace", []runtime.Object{clusterRole("r", getPods), binding("guard", "ClusterRole", "r", me)}, p("guard", "", "pods", "get"), true},
		{"RoleBinding to a ClusterRole: not cluster-wide", []runtime.Object{clusterRole("r", getPods), binding("guard", "ClusterRole", "r", me)}, p("", "", "pods", "get"), false},
		{"RoleBinding to a ClusterRole: not another namespace", []runtime.Object{clusterRole("r", getPods), binding("guard", "ClusterRole", "r", me)}, p("other", "", "pods", "get"), false},
		{"wildcard verb", []runtime.Object{clusterRole("r", rule(core, []string{"pods"}, []string{"*"})), clusterBinding("ClusterRole", "r", me)}, p("", "", "pods", "delete"), true},
		{"wildcard resource", []runtime.Object{clusterRole("r", rule(core, []string{"*"}, []string{"get"})), clusterBinding("ClusterRole", "r", me)}, p("", "", "secrets", "get"), true},
		{"wildcard resource covers subresources", []runtime.Object{clusterRole("r", rule(core, []string{"*"}, []string{"create"})), clusterBinding("ClusterRole", "r", me)}, p("", "", "pods/exec", "create"), true},
		{"wildcard group", []runtime.Object{clusterRole("r", rule([]string{"*"}, []string{"leases"}, []string{"get"})), clusterBinding("ClusterRole", "r", me)}, p("", "coordination.k8s.io", "leases", "get"), true},
		{"a resource does not cover its subresource", []runtime.Object{clusterRole("r", rule(core, []string{"pods"}, []string{"create"})), clusterBinding("ClusterRole", "r", me)}, p("", "", "pods/eviction", "create"), false},
		{"a subresource does not cover its resource", []runtime.Object{clusterRole("r", rule(core, []string{"pods/eviction"}, []string{"create"})), clusterBinding("ClusterRole", "r", me)}, p("", "", "pods", "create"), false},
		{"the subresource", []runtime.Object{clusterRole("r", rule(core, []string{"pods/eviction"}, []string{"create"})), clusterBinding("ClusterRole", "r", me)}, p("", "", "pods/eviction", "create"), true},
		{"*/subresource", []runtime.Object{clusterRole("r", rule(core, []string{"*/eviction"}, []string{"create"})), clusterBinding("ClusterRole", "r", me)}, p("", "", "pods/eviction", "create"), true},
		{"*/subresource is not another one", []runtime.Object{clusterRole("r", rule(core, []string{"*/eviction"}, []string{"create"})), clusterBinding("ClusterRole", "r", me)}, p("", "", "pods/exec", "create"), false},
		{"resourceNames: the name", []runtime.Object{role("guard", "r", rule(core, []string{"configmaps"}, []string{"get"}, "ledger")), binding("guard", "Role", "r", me)}, named(p("guard", "", "configmaps", "get"), "ledger"), true},
		{"resourceNames: another name", []runtime.Object{role("guard", "r", rule(core, []string{"configmaps"}, []string{"get"}, "ledger")), binding("guard", "Role", "r", me)}, named(p("guard", "", "configmaps", "get"), "other"), false},
		{"resourceNames: no name", []runtime.Object{role("guard", "r", rule(core, []string{"configmaps"}, []string{"get"}, "ledger")), binding("guard", "Role", "r", me)}, p("guard", "", "configmaps", "get"), false},
		{"no resourceNames: any name", []runtime.Object{role("guard", "r", rule(core, []string{"configmaps"}, []string{"get"})), binding("guard", "Role", "r", me)}, named(p("guard", "", "configmaps", "get"), "other"), true},
		{"another ServiceAccount", []runtime.Object{clusterRole("r", getPods), clusterBinding("ClusterRole", "r", sa("guard", "exp"))}, p("", "", "pods", "get"), false},
		{"the same name in another namespace", []runtime.Object{clusterRole("r", getPods), clusterBinding("ClusterRole", "r", sa("other", "rem"))}, p("", "", "pods", "get"), false},
		{"a ServiceAccount subject without namespace: the RoleBinding's", []runtime.Object{role("guard", "r", getPods), binding("guard", "Role", "r", sa("", "rem"))}, p("guard", "", "pods", "get"), true},
		{"a ServiceAccount subject without namespace in another namespace", []runtime.Object{role("other", "r", getPods), binding("other", "Role", "r", sa("", "rem"))}, p("other", "", "pods", "get"), false},
		{"the ServiceAccount's user name", []runtime.Object{clusterRole("r", getPods), clusterBinding("ClusterRole", "r", rbacv1.Subject{Kind: rbacv1.UserKind, Name: "system:serviceaccount:guard:rem"})}, p("", "", "pods", "get"), true},
		{"the group of its namespace's ServiceAccounts", []runtime.Object{clusterRole("r", getPods), clusterBinding("ClusterRole", "r", rbacv1.Subject{Kind: rbacv1.GroupKind, Name: "system:serviceaccounts:guard"})}, p("", "", "pods", "get"), true},
		{"the group of another namespace's ServiceAccounts", []runtime.Object{clusterRole("r", getPods), clusterBinding("ClusterRole", "r", rbacv1.Subject{Kind: rbacv1.GroupKind, Name: "system:serviceaccounts:other"})}, p("", "", "pods", "get"), false},
		{"every authenticated user", []runtime.Object{clusterRole("r", getPods), clusterBinding("ClusterRole", "r", rbacv1.Subject{Kind: rbacv1.GroupKind, Name: "system:authenticated"})}, p("", "", "pods", "get"), true},
	} {
		if got := deploytest.Allowed(tc.objs, "guard", "rem", tc.ask); got != tc.want {
			t.Errorf("%s: Allowed(%s) = %v, want %v", tc.name, deploytest.Describe(tc.ask), got, tc.want)
		}
	}
}

func TestAllowedAnywhere(t *testing.T) {
	getPods := rule([]string{""}, []string{"pods"}, []string{"get"})
	inGuard := []runtime.Object{role("guard", "r", getPods), binding("guard", "Role", "r", sa("guard", "rem"))}
	// Asked cluster-wide, found through the RoleBinding's namespace.
	if !deploytest.AllowedAnywhere(inGuard, "guard", "rem", deploytest.Perm("", "", "pods", "get")) {
		t.Error("a Role's grant in its namespace is not found anywhere")
	}
	if deploytest.AllowedAnywhere(inGuard, "guard", "rem", deploytest.Perm("", "", "pods", "delete")) {
		t.Error("a verb no rule grants is found")
	}
	if deploytest.AllowedAnywhere(inGuard, "guard", "exp", deploytest.Perm("", "", "pods", "get")) {
		t.Error("another ServiceAccount's grant is found")
	}
	// A rule limited to one Secret still lets the ServiceAccount get a Secret.
	oneSecret := []runtime.Object{role("guard", "r", rule([]string{""}, []string{"secrets"}, []string{"get"}, "token")), binding("guard", "Role", "r", sa("guard", "rem"))}
	if !deploytest.AllowedAnywhere(oneSecret, "guard", "rem", deploytest.Perm("", "", "secrets", "get")) {
		t.Error("a grant limited by resourceNames is not found")
	}
	if deploytest.AllowedAnywhere(oneSecret, "guard", "rem", named(deploytest.Perm("", "", "secrets", "get"), "other")) {
		t.Error("a grant limited to another name is found for a named request")
	}
}

func TestPermAndDescribe(t *testing.T) {
	a := deploytest.Perm("guard", "", "pods/eviction", "create")
	if a.Resource != "pods" || a.Subresource != "eviction" || a.Namespace != "guard" || a.Verb != "create" {
		t.Errorf("Perm: %+v", a)
	}
	if got, want := deploytest.Describe(a), "create pods/eviction. (guard)"; got != want {
		t.Errorf("Describe = %q, want %q", got, want)
	}
	if got, want := deploytest.Describe(named(deploytest.Perm("", "coordination.k8s.io", "leases", "get"), "l")), `get leases.coordination.k8s.io "l" (cluster-wide)`; got != want {
		t.Errorf("Describe = %q, want %q", got, want)
	}
}
