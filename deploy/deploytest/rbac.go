package deploytest

import (
	"fmt"
	"slices"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Perm is the request a ServiceAccount makes: verb on resource ("pods", or "pods/eviction"
// for a subresource) of the API group group, in namespace ns ("" asks for it cluster-wide),
// on any object. Set Name on the result to ask for one object.
func Perm(ns, group, resource, verb string) authorizationv1.ResourceAttributes {
	res, sub, _ := strings.Cut(resource, "/")
	return authorizationv1.ResourceAttributes{Namespace: ns, Group: group, Resource: res, Subresource: sub, Verb: verb}
}

// Describe names a request in a test's message, e.g. `get secrets. (cluster-wide)` or
// `update configmaps. "ledger" (guard)`.
func Describe(a authorizationv1.ResourceAttributes) string {
	ns := a.Namespace
	if ns == "" {
		ns = "cluster-wide"
	}
	res := a.Resource
	if a.Subresource != "" {
		res += "/" + a.Subresource
	}
	name := ""
	if a.Name != "" {
		name = fmt.Sprintf(" %q", a.Name)
	}
	return fmt.Sprintf("%s %s.%s%s (%s)", a.Verb, res, a.Group, name, ns)
}

// Allowed reports whether the RBAC objects among objs let the ServiceAccount saNamespace/sa
// do a, as the API server's RBAC authorizer decides: a ClusterRoleBinding grants its
// ClusterRole everywhere; a RoleBinding grants its Role, or a ClusterRole, only in the
// binding's namespace; a rule matches by group, resource (subresources and "*" included),
// verb and, when it lists resourceNames, only a request naming one of them. Subjects match
// the ServiceAccount itself, its user name, or the groups its token carries. Aggregated
// ClusterRoles and non-resource URLs are not evaluated: the manifests have none.
func Allowed(objs []runtime.Object, saNamespace, sa string, a authorizationv1.ResourceAttributes) bool {
	clusterRoles := map[string][]rbacv1.PolicyRule{}
	roles := map[[2]string][]rbacv1.PolicyRule{} // namespace, name
	for _, o := range objs {
		switch v := o.(type) {
		case *rbacv1.ClusterRole:
			clusterRoles[v.Name] = v.Rules
		case *rbacv1.Role:
			roles[[2]string{v.Namespace, v.Name}] = v.Rules
		}
	}
	grants := func(rules []rbacv1.PolicyRule) bool {
		return slices.ContainsFunc(rules, func(r rbacv1.PolicyRule) bool { return RuleAllows(r, a) })
	}
	for _, o := range objs {
		switch b := o.(type) {
		case *rbacv1.ClusterRoleBinding:
			// Only a ClusterRole can be bound cluster-wide; the API server ignores anything else.
			if b.RoleRef.Kind == "ClusterRole" && bindsServiceAccount(b.Subjects, "", saNamespace, sa) && grants(clusterRoles[b.RoleRef.Name]) {
				return true
			}
		case *rbacv1.RoleBinding:
			if a.Namespace != b.Namespace || !bindsServiceAccount(b.Subjects, b.Namespace, saNamespace, sa) {
				continue
			}
			rules := roles[[2]string{b.Namespace, b.RoleRef.Name}]
			if b.RoleRef.Kind == "ClusterRole" {
				rules = clusterRoles[b.RoleRef.Name]
			}
			if grants(rules) {
				return true
			}
		}
	}
	return false
}

// AllowedAnywhere is Allowed in some namespace of objs or cluster-wide, whatever a.Namespace
// says, and with no a.Name on some object, a named one included: a check that a
// ServiceAccount may never do a.
func AllowedAnywhere(objs []runtime.Object, saNamespace, sa string, a authorizationv1.ResourceAttributes) bool {
	scopes := []string{""}
	names := []string{a.Name}
	for _, o := range objs {
		switch v := o.(type) {
		case *rbacv1.RoleBinding:
			scopes = append(scopes, v.Namespace)
		case *rbacv1.ClusterRole:
			names = append(names, resourceNames(v.Rules, a.Name)...)
		case *rbacv1.Role:
			names = append(names, resourceNames(v.Rules, a.Name)...)
		}
	}
	for _, ns := range scopes {
		for _, name := range names {
			a.Namespace, a.Name = ns, name
			if Allowed(objs, saNamespace, sa, a) {
				return true
			}
		}
	}
	return false
}

// resourceNames are the names rules limit themselves to, when the request names no object.
func resourceNames(rules []rbacv1.PolicyRule, asked string) []string {
	if asked != "" {
		return nil
	}
	var out []string
	for _, r := range rules {
		out = append(out, r.ResourceNames...)
	}
	return out
}

// RuleAllows reports whether one rule grants a (the rbac/v1 matching of the API server's
// authorizer, without non-resource URLs).
func RuleAllows(r rbacv1.PolicyRule, a authorizationv1.ResourceAttributes) bool {
	has := func(list []string, v string) bool {
		return slices.Contains(list, v) || slices.Contains(list, rbacv1.ResourceAll)
	}
	if !has(r.APIGroups, a.Group) || !has(r.Verbs, a.Verb) {
		return false
	}
	// A rule limited by name allows no request without one (list, watch, create of any).
	if len(r.ResourceNames) > 0 && !slices.Contains(r.ResourceNames, a.Name) {
		return false
	}
	want := a.Resource
	if a.Subresource != "" {
		want += "/" + a.Subresource
	}
	return slices.ContainsFunc(r.Resources, func(res string) bool {
		return res == rbacv1.ResourceAll || res == want || a.Subresource != "" && res == "*/"+a.Subresource
	})
}

// bindsServiceAccount reports whether subjects name the ServiceAccount ns/name. A
// ServiceAccount subject without a namespace means the binding's own (bindingNS; "" for a
// ClusterRoleBinding, where it is invalid).
func bindsServiceAccount(subjects []rbacv1.Subject, bindingNS, ns, name string) bool {
	return slices.ContainsFunc(subjects, func(s rbacv1.Subject) bool {
		switch s.Kind {
		case rbacv1.ServiceAccountKind:
			sns := s.Namespace
			if sns == "" {
				sns = bindingNS
			}
			return s.Name == name && sns != "" && sns == ns
		case rbacv1.UserKind:
			return s.Name == "system:serviceaccount:"+ns+":"+name
		case rbacv1.GroupKind:
			return s.Name == "system:serviceaccounts" || s.Name == "system:serviceaccounts:"+ns || s.Name == "system:authenticated"
		}
		return false
	})
}
