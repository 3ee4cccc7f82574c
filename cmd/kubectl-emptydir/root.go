package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/prometheus/common/version"
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/yaml"

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
	newOptionsCmd,
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
		Long: `kubectl emptydir shows emptyDir volumes, pods and containers against the local-storage limits
the kubelet enforces, from emptyDir guard's exporters or Prometheus, with your kubeconfig.`,
		Example: `  # Pod volumes, pods and containers nearest to their limits, in every namespace you may see
  kubectl emptydir top -A`,
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
	// kubectl's client flags are global, as kubectl's own; `options` lists them, and --help
	// leaves them out (usageTemplate).
	o.ConfigFlags.AddFlags(root.PersistentFlags())
	root.SetUsageTemplate(usageTemplate)
	for _, sub := range subcommands {
		root.AddCommand(sub(o))
	}
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() != "completion" {
			continue
		}
		// cobra's instructions run to 30 lines for zsh; the setup kubectl needs to complete a
		// plugin's arguments is in the docs.
		for _, shell := range c.Commands() {
			shell.Long = fmt.Sprintf("Prints the %s completion script of kubectl emptydir; how to set it up, and kubectl's\ncompletion of a plugin's arguments: docs/kubectl-plugin.md.", shell.Name())
		}
	}
	return root
}

// usageTemplate is cobra's without the inherited (global) flags, which kubectl's own --help
// leaves to `kubectl options` too: a command's help shows the flags that apply to it.
const usageTemplate = `Usage:{{if .Runnable}}
  {{.UseLine}}{{end}}{{if .HasAvailableSubCommands}}
  {{.CommandPath}} [command]{{end}}{{if .HasExample}}

Examples:
{{.Example}}{{end}}{{if .HasAvailableSubCommands}}

Available Commands:{{range .Commands}}{{if (or .IsAvailableCommand (eq .Name "help"))}}
  {{rpad .Name .NamePadding }} {{.Short}}{{end}}{{end}}{{end}}{{if .LocalNonPersistentFlags.HasAvailableFlags}}

Flags:
{{.LocalNonPersistentFlags.FlagUsages | trimTrailingWhitespaces}}{{end}}

Use "kubectl emptydir options" for a list of global command-line options (applies to all commands).{{if .HasAvailableSubCommands}}
Use "{{.CommandPath}} [command] --help" for more information about a command.{{end}}
`

func newOptionsCmd(o *plugin.Options) *cobra.Command {
	return &cobra.Command{
		Use:   "options",
		Short: "Print the list of flags inherited by all commands",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(o.Out, "The following options can be passed to any command:\n\n%s",
				cmd.Root().PersistentFlags().FlagUsages())
			return err
		},
	}
}

// versionInfo is what `version -o json|yaml` prints.
type versionInfo struct {
	Version   string `json:"version"`
	Revision  string `json:"revision"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

func newVersionCmd(o *plugin.Options) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the plugin's version",
		Args:  noArgs,
		RunE: func(*cobra.Command, []string) error {
			v := versionInfo{Version: cmp.Or(version.Version, "unknown"), Revision: cmp.Or(version.Revision, "unknown"),
				GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
			var b []byte
			var err error
			switch output {
			case "":
				// A commit's 12 first hex digits name it, as git describe does; -o json has all 40.
				_, err = fmt.Fprintf(o.Out, "kubectl-emptydir %s (revision %.12s, %s, %s)\n", v.Version, v.Revision, v.GoVersion, v.Platform)
				return err
			case "json":
				b, err = json.MarshalIndent(v, "", "    ")
				b = append(b, '\n')
			case "yaml":
				b, err = yaml.Marshal(v)
			default:
				return plugin.UsageError(fmt.Errorf("unable to match a printer suitable for the output format %q, allowed formats are: json,yaml", output))
			}
			if err == nil {
				_, err = o.Out.Write(b)
			}
			return err
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "One of 'yaml' or 'json'.")
	return cmd
}

// noArgs is cobra.NoArgs, marked as a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if err := cobra.NoArgs(cmd, args); err != nil {
		return plugin.UsageError(err)
	}
	return nil
}
