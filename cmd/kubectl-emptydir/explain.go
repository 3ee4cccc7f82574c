package main

import (
	"github.com/spf13/cobra"

	"github.com/emptydir-guard/emptydir-guard/internal/plugin"
)

func newExplainCmd(o *plugin.Options) *cobra.Command {
	e := &plugin.ExplainOptions{Options: o}
	return &cobra.Command{
		Use:   "explain POD",
		Short: "What counts toward a pod's local-storage limits, measured now, and what happens at the limit",
		Long: `Measures the pod live (its node's emptyDir guard exporter walks its volumes, writable layers
and logs now, through the API server's pod proxy) and explains, limit by limit, what counts
toward it: each emptyDir volume against its sizeLimit; the pod against its ephemeral-storage
limit (emptyDir volumes, writable layers, logs, other); each container against its own (logs,
writable layer). Then what the kubelet and emptyDir guard do, and when, and whether the pod's
PodDisruptionBudgets would let emptyDir guard evict it now.

Needs get on the pod (your own RBAC), and list pods and get pods/proxy in the release namespace
(--guard-namespace).`,
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
}
