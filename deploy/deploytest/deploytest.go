// Package deploytest holds the test helpers shared by the tests of the manifests: the
// kustomize base (deploy) and the Helm chart (test/helm).
package deploytest

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/emptydir-guard/emptydir-guard/deploy"
)

// MustFind is the object of type T named name among objs; the test fails, naming the
// objects there are, when there is none.
func MustFind[T runtime.Object](t testing.TB, objs []runtime.Object, name string) T {
	t.Helper()
	v, ok := deploy.Find[T](objs, name)
	if !ok {
		var have []string
		for _, o := range objs {
			if acc, ok := o.(metav1.Object); ok {
				have = append(have, o.GetObjectKind().GroupVersionKind().Kind+"/"+acc.GetName())
			}
		}
		t.Fatalf("no %T %s in %v", v, name, have)
	}
	return v
}

// ExporterDaemonSet is the exporter's DaemonSet named name among objs (the base's is
// emptydir-exporter, a Helm release's <release>-emptydir-exporter); the test fails without it.
func ExporterDaemonSet(t testing.TB, objs []runtime.Object, name string) *appsv1.DaemonSet {
	t.Helper()
	return MustFind[*appsv1.DaemonSet](t, objs, name)
}

// RemediatorDeployment is the remediator's Deployment named name among objs; the test fails
// without it.
func RemediatorDeployment(t testing.TB, objs []runtime.Object, name string) *appsv1.Deployment {
	t.Helper()
	return MustFind[*appsv1.Deployment](t, objs, name)
}

// All is every object of type T among objs, in order.
func All[T runtime.Object](objs []runtime.Object) []T {
	var out []T
	for _, o := range objs {
		if v, ok := o.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

// PodSpecs are the pod templates of the DaemonSets and Deployments among objs, by
// "DaemonSet/<name>" or "Deployment/<name>".
func PodSpecs(objs []runtime.Object) map[string]corev1.PodSpec {
	out := map[string]corev1.PodSpec{}
	for _, o := range objs {
		switch v := o.(type) {
		case *appsv1.DaemonSet:
			out["DaemonSet/"+v.Name] = v.Spec.Template.Spec
		case *appsv1.Deployment:
			out["Deployment/"+v.Name] = v.Spec.Template.Spec
		}
	}
	return out
}

// KindNames lists objs as sorted "Kind/name" strings.
func KindNames(objs []runtime.Object) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.GetObjectKind().GroupVersionKind().Kind+"/"+o.(metav1.Object).GetName())
	}
	slices.Sort(out)
	return out
}

// ArgValues are the values of every --flag=value in args, in order; a bare --flag (a
// boolean) gives "".
func ArgValues(args []string, flag string) []string {
	var out []string
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+flag+"="); ok {
			out = append(out, v)
		} else if a == "--"+flag {
			out = append(out, "")
		}
	}
	return out
}

// ArgValue is the first --flag=value of args; false when there is none.
func ArgValue(args []string, flag string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+flag+"="); ok {
			return v, true
		}
	}
	return "", false
}
