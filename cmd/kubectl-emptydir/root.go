package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/prometheus/common/version"
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/emptydir-guard/emptydir-guard/internal/plugin"
)

// subcommands are the commands under kubectl-emptydir, in the order --help lists them. A new
// one is a file with its constructor and one line here.
var subcommands = []func(*plugin.Options) *cobra.Command{
	newTopCmd,
	newExplainCmd,
	newRecommendCmd,
	newPolicyCheckCmd,
	newVersionCmd,
}

func run() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return execute(ctx, newRootCmd(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}), os.Args[1:])
}

// execute runs root with args and turns its error into the exit code, printing it as kubectl
// prints its own ("error: ...").
func execute(ctx context.Context, root *cobra.Command, args []string) int {
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return plugin.ExitOK
	}
	fmt.Fprint(root.ErrOrStderr(), plugin.Sprintf("error: %v\n", err))
	if plugin.IsUsageError(err) || isFlagError(err) {
		fmt.Fprintf(root.ErrOrStderr(), "See '%s --help' for usage.\n", cmd.CommandPath())
	}
	return plugin.ExitError
}

// isFlagError reports an error of cobra's flag or argument parsing, which SetFlagErrorFunc
// marks.
func isFlagError(err error) bool { return errors.As(err, new(flagError)) }

type flagError struct{ error }

func (e flagError) Unwrap() error { return e.error }

func newRootCmd(streams genericiooptions.IOStreams) *cobra.Command {
	o := plugin.NewOptions(streams)
	root := &cobra.Command{
		Use:   "kubectl-emptydir",
		Short: "emptyDir volumes, pods and containers against their local-storage limits",
		Long: `kubectl emptydir shows what fills emptyDir volumes and ephemeral storage, against the
sizeLimit and ephemeral-storage limits the kubelet enforces, from emptyDir guard's exporters
(live, through the API server) or from Prometheus (--prometheus-url). It talks to the cluster
as kubectl does, with your kubeconfig and your RBAC.`,
		Example: `  # Pod volumes, pods and containers nearest to their limits, in every namespace you may see
  kubectl emptydir top -A

  # What counts toward my-pod's limits, measured now
  kubectl emptydir explain my-pod -n my-namespace`,
		Annotations: map[string]string{
			// Help and usage lines read "kubectl emptydir", as the user types it.
			cobra.CommandDisplayNameAnnotation: "kubectl emptydir",
		},
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return o.Validate(cmd)
		},
	}
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return flagError{err} })
	o.AddFlags(root.PersistentFlags())
	for _, sub := range subcommands {
		root.AddCommand(sub(o))
	}
	return root
}

func newVersionCmd(o *plugin.Options) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the plugin's version",
		Args:  noArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprintln(o.Out, version.Print("kubectl-emptydir"))
			return err
		},
	}
}

// noArgs is cobra.NoArgs, marked as a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if err := cobra.NoArgs(cmd, args); err != nil {
		return plugin.UsageError(err)
	}
	return nil
}
