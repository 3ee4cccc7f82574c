package main

import (
	"github.com/spf13/cobra"

	"github.com/emptydir-guard/emptydir-guard/internal/plugin"
)

func newTopCmd(o *plugin.Options) *cobra.Command {
	t := plugin.NewTopOptions(o)
	cmd := &cobra.Command{
		Use:   "top",
		Short: "Pod volumes, pods and containers nearest to their local-storage limits",
		Long: `Lists emptyDir volumes against their sizeLimit, and pods and containers against their
ephemeral-storage limits, nearest to the limit first: used, limit, share of it, the age of the
measurement, the node.

By default the numbers come live from emptyDir guard's exporters, read through the API server's
pod proxy (you need get pods/proxy and list pods in the release namespace, --guard-namespace);
only the pods you may list are shown. With --prometheus-url they come from Prometheus, which
needs no Kubernetes permission (but -l, which reads the pods' labels from the API server).

USED prefixed with >= is a lower bound (an incomplete measurement); AGE prefixed with <= is the
age of the node's oldest measurement behind a limit, because the exporter does not publish each
one's (the opt-in family emptydir_measurement_age_seconds).`,
		Example: `  # In the current namespace
  kubectl emptydir top

  # Every namespace you may see, the pods labelled app=web only
  kubectl emptydir top -A -l app=web

  # One node, with the volumes' medium and the pods' UIDs
  kubectl emptydir top -A --node worker-3 -o wide

  # From Prometheus (no Kubernetes permissions needed), as JSON
  kubectl emptydir top -A --prometheus-url http://localhost:9090 -o json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return t.Run(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&t.AllNamespaces, "all-namespaces", "A", t.AllNamespaces, "Every namespace you may list pods in.")
	f.StringVarP(&t.Selector, "selector", "l", t.Selector, "Label selector of the pods (=, ==, !=, in, notin).")
	f.StringVar(&t.Node, "node", t.Node, "Only pods on this node.")
	f.IntVar(&t.Concurrency, "concurrency", t.Concurrency, "Exporters read at once.")
	_ = cmd.RegisterFlagCompletionFunc("node", completeNodes(o))
	return cmd
}
