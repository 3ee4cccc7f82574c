package plugin

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// Scope is which pods a command looks at, as kubectl's flags say it.
type Scope struct {
	// Namespace is -n (or the kubeconfig's namespace); ignored with AllNamespaces.
	Namespace     string
	AllNamespaces bool
	// Selector is -l, a label selector.
	Selector string
	// Node is --node: only pods on that node.
	Node string
	// Pod is a pod's name in Namespace: that pod only.
	Pod string
}

func (s Scope) listOptions() metav1.ListOptions {
	o := metav1.ListOptions{LabelSelector: s.Selector, Limit: 500}
	if s.Node != "" {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", s.Node).String()
	}
	return o
}

// VisiblePods lists, with the user's own credentials, the pods of scope the user may list,
// by UID (with scope.Pod, gets that pod: not found is an error). Rows of other pods are never shown: an exporter reports every pod of its node, and
// what the user could not list with kubectl get pods must not reach them through it.
//
// With AllNamespaces, a user who may not list pods cluster-wide gets the pods of each of the
// namespaces candidates returns (those the exporters report) that they may list; namespaces
// they may not list are skipped without a word, so that not even their names show.
func VisiblePods(ctx context.Context, client kubernetes.Interface, scope Scope, candidates func(context.Context) ([]string, error)) (map[types.UID]*corev1.Pod, error) {
	out := map[types.UID]*corev1.Pod{}
	if scope.Pod != "" {
		p, err := client.CoreV1().Pods(scope.Namespace).Get(ctx, scope.Pod, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("pod %q not found in namespace %q", scope.Pod, scope.Namespace)
		}
		if err != nil {
			return nil, err
		}
		if scope.Node == "" || p.Spec.NodeName == scope.Node {
			out[p.UID] = p
		}
		return out, nil
	}
	ns := scope.Namespace
	if scope.AllNamespaces {
		ns = metav1.NamespaceAll
	}
	err := listPods(ctx, client, ns, scope.listOptions(), out)
	if err == nil || !scope.AllNamespaces || !apierrors.IsForbidden(err) || candidates == nil {
		return out, err
	}
	names, err := candidates(ctx)
	if err != nil {
		return nil, err
	}
	for _, ns := range names {
		if err := listPods(ctx, client, ns, scope.listOptions(), out); err != nil && !apierrors.IsForbidden(err) {
			return nil, err
		}
	}
	return out, nil
}

func nodeOf(o metav1.ListOptions) (string, bool) {
	f, err := fields.ParseSelector(o.FieldSelector)
	if err != nil || o.FieldSelector == "" {
		return "", false
	}
	return f.RequiresExactMatch("spec.nodeName")
}

func listPods(ctx context.Context, client kubernetes.Interface, ns string, opts metav1.ListOptions, out map[types.UID]*corev1.Pod) error {
	for {
		list, err := client.CoreV1().Pods(ns).List(ctx, opts)
		if err != nil {
			if apierrors.IsForbidden(err) {
				return err
			}
			where := "namespace " + ns
			if ns == "" {
				where = "all namespaces"
			}
			return fmt.Errorf("listing pods in %s: %w", where, err)
		}
		for i := range list.Items {
			p := &list.Items[i]
			if node, ok := nodeOf(opts); ok && p.Spec.NodeName != node {
				continue // a server that ignored the field selector
			}
			out[p.UID] = p
		}
		if list.Continue == "" {
			return nil
		}
		opts.Continue = list.Continue
	}
}
