package main

import (
	"github.com/spf13/cobra"

	"github.com/emptydir-guard/emptydir-guard/internal/plugin"
)

func newPolicyCheckCmd(o *plugin.Options) *cobra.Command {
	c := &plugin.PolicyCheckOptions{Options: o}
	cmd := &cobra.Command{
		Use:   "policy-check",
		Short: "What the limit policy would refuse under Deny: workloads and pods without their limits",
		Long: `Before the limit policy's binding is switched to Deny, lists what it would then refuse:
workloads whose next template change it would refuse (template-change), and pods lacking their
limits that no built-in controller remakes (re-creation). More: docs/kubectl-plugin.md.`,
		Example: `  # Everything, before switching to Deny
  kubectl emptydir policy-check -A

  # One namespace, as JSON (the number of objects: jq '.items | length')
  kubectl emptydir policy-check -n shop -o json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return c.Run(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&c.AllNamespaces, "all-namespaces", "A", c.AllNamespaces, "Every namespace the policy checks.")
	f.StringVar(&c.Policy, "policy", c.Policy, "The ValidatingAdmissionPolicy (empty: the one labelled "+plugin.LimitPolicyLabel+").")
	o.AddOutputFlags(cmd, true, "wide")
	return cmd
}
