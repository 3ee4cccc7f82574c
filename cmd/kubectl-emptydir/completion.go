package main

import (
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/emptydir-guard/emptydir-guard/internal/plugin"
)

// completePods completes the first argument with the names of the pods in the namespace -n
// (or the kubeconfig) names, as kubectl completes pod names.
func completePods(o *plugin.Options) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ns, err := o.Namespace()
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		c, err := o.Clientset()
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		list, err := c.CoreV1().Pods(ns).List(cmd.Context(), metav1.ListOptions{})
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		return namesWithPrefix(list.Items, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

// completeNodes completes --node with the cluster's node names, for a user who may list them.
func completeNodes(o *plugin.Options) cobra.CompletionFunc {
	return func(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		c, err := o.Clientset()
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		list, err := c.CoreV1().Nodes().List(cmd.Context(), metav1.ListOptions{})
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		return namesWithPrefix(list.Items, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

// namesWithPrefix are the names of objs that begin with prefix, in their order.
func namesWithPrefix[T any, PT interface {
	*T
	GetName() string
}](objs []T, prefix string) []cobra.Completion {
	var out []cobra.Completion
	for i := range objs {
		if name := PT(&objs[i]).GetName(); strings.HasPrefix(name, prefix) {
			out = append(out, name)
		}
	}
	return out
}
