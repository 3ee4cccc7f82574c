// Package deploytest holds the test helpers shared by the tests of the manifests: the
// kustomize base (deploy) and the Helm chart (test/helm).
package deploytest

import (
	"testing"

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
