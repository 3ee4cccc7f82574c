package plugin

import (
	"errors"
	"fmt"
	"runtime"
	"strings"

	"github.com/prometheus/common/version"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// DefaultGuardNamespace is the namespace the chart's install commands put the release in.
const DefaultGuardNamespace = "emptydir-guard"

// Options are the settings the subcommands share; each registers the flags of those that
// apply to it. NewOptions carries the defaults; the flags only bind to them.
type Options struct {
	// ConfigFlags are kubectl's own flags (--kubeconfig, --context, -n, --as, ...), global as
	// kubectl's: the plugin talks to the API server as the user kubectl would, with the user's
	// RBAC.
	ConfigFlags *genericclioptions.ConfigFlags
	// PrometheusURL, when set, makes the commands read from Prometheus instead of from the
	// exporters through the API server.
	PrometheusURL string
	// GuardNamespace is the namespace of the emptyDir guard release whose exporters answer.
	GuardNamespace string
	// Output is -o: "" (a table), one of cli-runtime's formats (kubectl's), or one the
	// running command prints itself (Format).
	Output string
	// Template and AllowMissingKeys are the template formats' --template and
	// --allow-missing-template-keys, as kubectl's.
	Template         string
	AllowMissingKeys bool
	// NoHeaders leaves out the table's header line.
	NoHeaders bool

	genericiooptions.IOStreams
}

// NewOptions returns the defaults, writing to streams.
func NewOptions(streams genericiooptions.IOStreams) *Options {
	return &Options{
		ConfigFlags:      genericclioptions.NewConfigFlags(true),
		GuardNamespace:   DefaultGuardNamespace,
		AllowMissingKeys: true,
		IOStreams:        streams,
	}
}

// AddPrometheusFlag registers --prometheus-url, for the commands that can read Prometheus.
func (o *Options) AddPrometheusFlag(fs *pflag.FlagSet) {
	fs.StringVar(&o.PrometheusURL, "prometheus-url", o.PrometheusURL,
		"Read from this Prometheus (its HTTP API) instead of live from the exporters.")
}

// AddGuardNamespaceFlag registers --guard-namespace, for the commands that read the
// exporters live.
func (o *Options) AddGuardNamespaceFlag(fs *pflag.FlagSet) {
	fs.StringVar(&o.GuardNamespace, "guard-namespace", o.GuardNamespace,
		"Namespace of the emptyDir guard release whose exporters measure.")
}

// AddOutputFlags registers -o, with kubectl's formats from cli-runtime and the command's own
// (own: "wide" for a table with wide columns, "patch"), and --template; with table, the
// command prints a table by default, and --no-headers too.
func (o *Options) AddOutputFlags(cmd *cobra.Command, table bool, own ...string) {
	f := cmd.Flags()
	f.StringVarP(&o.Output, "output", "o", o.Output, "Output format. One of: ("+strings.Join(o.outputFormats(own), ", ")+").")
	f.StringVar(&o.Template, "template", o.Template, "Template for -o go-template, go-template-file, jsonpath or jsonpath-file.")
	_ = cmd.MarkFlagFilename("template")
	f.BoolVar(&o.AllowMissingKeys, "allow-missing-template-keys", o.AllowMissingKeys, "Ignore a field or map key a template misses.")
	// Kept out of --help, as it is of kubectl's but for get: few use it.
	_ = f.MarkHidden("allow-missing-template-keys")
	if table {
		f.BoolVar(&o.NoHeaders, "no-headers", o.NoHeaders, "Print tables without their header line.")
	}
	_ = cmd.RegisterFlagCompletionFunc("output", func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return o.outputFormats(own), cobra.ShellCompDirectiveNoFileComp
	})
}

// Validate checks the flags the command cmd has.
func (o *Options) Validate(cmd *cobra.Command) error {
	if cmd != nil && cmd.Flags().Lookup("guard-namespace") != nil && o.GuardNamespace == "" {
		return UsageError(errors.New("--guard-namespace must not be empty"))
	}
	return nil
}

// Namespace is the namespace the user's kubeconfig or -n names, as kubectl chooses it.
func (o *Options) Namespace() (string, error) {
	ns, _, err := o.ConfigFlags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return "", fmt.Errorf("kubeconfig: %w", err)
	}
	return ns, nil
}

// REST is the client configuration of the user's kubeconfig and flags.
func (o *Options) REST() (*rest.Config, error) {
	rc, err := o.ConfigFlags.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	rc = rest.CopyConfig(rc)
	// The API server's audit log names the plugin and its version, as it names kubectl's.
	rc.UserAgent = fmt.Sprintf("kubectl-emptydir/%s (%s/%s)", version.Version, runtime.GOOS, runtime.GOARCH)
	return rc, nil
}

// Clientset is a typed client of the user's kubeconfig and flags.
func (o *Options) Clientset() (kubernetes.Interface, error) {
	rc, err := o.REST()
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(rc)
}

// Warnf writes one warning line to the error stream, as kubectl writes its warnings.
func (o *Options) Warnf(format string, args ...any) {
	if o.ErrOut == nil {
		return
	}
	fmt.Fprint(o.ErrOut, Sprintf("Warning: "+strings.TrimSuffix(format, "\n")+"\n", args...))
}
