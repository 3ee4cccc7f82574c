package main

import (
	"github.com/spf13/cobra"

	"github.com/emptydir-guard/emptydir-guard/internal/plugin"
)

func newExplainCmd(o *plugin.Options) *cobra.Command {
	e := &plugin.ExplainOptions{Options: o}
	cmd := &cobra.Command{
		Use:   "explain POD",
		Short: "What counts toward a pod's local-storage limits, measured now, and what happens at the limit",
		Long: `Measures the pod live (its node's exporter walks it now) and explains, limit by limit, what
counts toward it, what the kubelet and emptyDir guard do at which point, and whether the pod's
PodDisruptionBudgets let emptyDir guard evict it now. More: docs/kubectl-plugin.md.`,
		Example: `  # Explain a pod of the current namespace
  kubectl emptydir explain web-7d4b9c-x2k5q

  # The same as JSON, for a script
  kubectl emptydir explain web-7d4b9c-x2k5q -n shop -o json`,
		Args: func(cmd *cobra.Command, args []string) error {
			if err := cobra.ExactArgs(1)(cmd, args); err != nil {
				return plugin.UsageError(err)
			}
			return nil
		},
		ValidArgsFunction: completePods(o),
		RunE: func(cmd *cobra.Command, args []string) error {
			e.Pod = args[0]
			return e.Run(cmd.Context())
		},
	}
	o.AddGuardNamespaceFlag(cmd.Flags())
	o.AddOutputFlags(cmd, false)
	return cmd
}
