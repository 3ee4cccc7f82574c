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
		Long: `Before the limit policy's binding is switched to Deny (docs/policy.md), lists what it would
then refuse, read from the installed policy (its checks, whether it checks workloads) and its
bindings (the namespaces they select, exemptions left out):

  template-change  a workload whose pod template lacks the limits: it keeps running, and its
                   controller keeps replacing its pods, but its next template change (a
                   rollout restart, an image bump) is refused;
  re-creation      a pod that lacks them and that no built-in controller remakes (a bare pod,
                   an operator's): the next pod like it is refused. With limitPolicy.workloads
                   false every pod is checked, so every such pod is listed, its replacement too;
                   with a policy that checks the built-in controllers (a chart older than
                   that), a Deployment's ReplicaSets and a CronJob's Jobs too.

MISSING names the disk emptyDirs without a sizeLimit and the containers without an
ephemeral-storage limit, as the policy's message would.

Needs get or list on validatingadmissionpolicies and list on validatingadmissionpolicybindings,
list (with -A) or get on namespaces, and list on pods and on the workloads' kinds.`,
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
	return cmd
}
