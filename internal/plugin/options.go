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

// Options are the settings every subcommand shares. NewOptions carries the defaults; the
// root command's flags only bind to them.
type Options struct {
	// ConfigFlags are kubectl's own flags (--kubeconfig, --context, -n, --as, ...): the plugin
	// talks to the API server as the user kubectl would, with the user's RBAC.
	ConfigFlags *genericclioptions.ConfigFlags
	// PrometheusURL, when set, makes the commands read from Prometheus instead of from the
	// exporters through the API server.
	PrometheusURL string
	// GuardNamespace is the namespace of the emptyDir guard release whose exporters answer.
	GuardNamespace string
	// Output is "", "wide", "json", "yaml" or a format the running command adds
	// (OutputsAnnotation).
	Output string
	// outputs are the formats the running command adds, set by Validate.
	outputs []string
	// NoHeaders leaves out the table's header line.
	NoHeaders bool

	genericiooptions.IOStreams
}

// NewOptions returns the defaults, writing to streams.
func NewOptions(streams genericiooptions.IOStreams) *Options {
	return &Options{
		ConfigFlags:    genericclioptions.NewConfigFlags(true),
		GuardNamespace: DefaultGuardNamespace,
		IOStreams:      streams,
	}
}

// AddFlags registers the shared flags on fs (the root command's persistent flags).
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	o.ConfigFlags.AddFlags(fs)
	fs.StringVar(&o.PrometheusURL, "prometheus-url", o.PrometheusURL,
		"Read from this Prometheus (its HTTP API) instead of live from the exporters through the API server.")
	fs.StringVar(&o.GuardNamespace, "guard-namespace", o.GuardNamespace,
		"Namespace of the emptyDir guard release whose exporters measure.")
	fs.StringVarP(&o.Output, "output", "o", o.Output, "Output format: wide, json or yaml; empty: a table.")
	fs.BoolVar(&o.NoHeaders, "no-headers", o.NoHeaders, "Print tables without their header line.")
}

// Validate checks the shared flags for the command cmd runs, whose OutputsAnnotation adds
// output formats (nil: none).
func (o *Options) Validate(cmd *cobra.Command) error {
	o.outputs = nil
	if cmd != nil && cmd.Annotations[OutputsAnnotation] != "" {
		o.outputs = strings.Split(cmd.Annotations[OutputsAnnotation], ",")
	}
	if _, err := ParseOutput(o.Output, o.outputs...); err != nil {
		return err
	}
	if o.GuardNamespace == "" {
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

// Print writes v as o.Output asks: the table t for "" and "wide", v itself as JSON or YAML.
func (o *Options) Print(t *Table, v any) error {
	f, err := o.Format()
	if err != nil {
		return err
	}
	return Print(o.Out, f, o.NoHeaders, t, v)
}

// Format is the output format -o chose: FormatCustom for one the running command adds, which
// it prints itself.
func (o *Options) Format() (Format, error) { return ParseOutput(o.Output, o.outputs...) }

// Warnf writes one warning line to the error stream, as kubectl writes its warnings.
func (o *Options) Warnf(format string, args ...any) {
	if o.ErrOut == nil {
		return
	}
	fmt.Fprint(o.ErrOut, Sprintf("Warning: "+strings.TrimSuffix(format, "\n")+"\n", args...))
}
