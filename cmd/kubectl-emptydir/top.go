package main

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/emptydir-guard/emptydir-guard/internal/plugin"
)

func newTopCmd(o *plugin.Options) *cobra.Command {
	t := plugin.NewTopOptions(o)
	cmd := &cobra.Command{
		Use:   "top [POD]",
		Short: "Pod volumes, pods and containers nearest to their local-storage limits",
		Long: `Lists emptyDir volumes against their sizeLimit, and pods and containers against their
ephemeral-storage limits, nearest to the limit first, live from emptyDir guard's exporters
(through the API server) or from Prometheus. USED >= is a lower bound, AGE <= an upper one.
More: docs/kubectl-plugin.md.`,
		Example: `  # Every namespace you may see, the pods labelled app=web only
  kubectl emptydir top -A -l app=web

  # One pod, the largest usage first, with the volumes' medium and the pod's UID
  kubectl emptydir top web-0 --sort-by=used -o wide`,
		Args: func(cmd *cobra.Command, args []string) error {
			if err := cobra.MaximumNArgs(1)(cmd, args); err != nil {
				return plugin.UsageError(err)
			}
			return nil
		},
		ValidArgsFunction: completePods(o),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				t.Pod = args[0]
			}
			return t.Run(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&t.AllNamespaces, "all-namespaces", "A", t.AllNamespaces, "Every namespace you may list pods in.")
	f.StringVarP(&t.Selector, "selector", "l", t.Selector, "Label selector of the pods (=, ==, !=, in, notin).")
	f.StringVar(&t.Node, "node", t.Node, "Only pods on this node.")
	f.StringVar(&t.SortBy, "sort-by", t.SortBy, "Sort by "+strings.Join(plugin.SortKeys, ", ")+": the largest first.")
	f.IntVar(&t.Concurrency, "concurrency", t.Concurrency, "Exporters read at once.")
	o.AddPrometheusFlag(f)
	o.AddGuardNamespaceFlag(f)
	o.AddOutputFlags(cmd, true, "wide")
	_ = cmd.RegisterFlagCompletionFunc("node", completeNodes(o))
	_ = cmd.RegisterFlagCompletionFunc("sort-by", cobra.FixedCompletions(plugin.SortKeys, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}
