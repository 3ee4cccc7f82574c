package monitoring

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/emptydir-guard/emptydir-guard/test/cluster"
)

// OperatorDirEnv names the directory test/promoperator/build.sh prints: the pinned Prometheus
// Operator's binary (operator), its CustomResourceDefinitions (crds/), and the Prometheus it
// configures (prometheus, its version in prometheus.version).
const OperatorDirEnv = "PROM_OPERATOR_DIR"

// OperatorPrometheus is the Prometheus build.sh built beside the operator, and its version
// as a Prometheus object's spec.version names it: the operator generates a configuration for
// that version. Debian's Prometheus cannot run it: it is built without Kubernetes service
// discovery, which every scrape job the operator generates uses.
func OperatorPrometheus(dir string) (bin, version string, err error) {
	bin = filepath.Join(dir, "prometheus")
	if _, err := os.Stat(bin); err != nil {
		return "", "", fmt.Errorf("the operator's Prometheus: %w (test/promoperator/build.sh builds it)", err)
	}
	v, err := os.ReadFile(filepath.Join(dir, "prometheus.version"))
	if err != nil {
		return "", "", fmt.Errorf("the operator's Prometheus: %w (test/promoperator/build.sh writes it)", err)
	}
	return bin, strings.TrimSpace(string(v)), nil
}

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// StartOperator installs the monitoring.coreos.com CRDs of dir/crds and runs the Prometheus
// Operator (dir/operator) inside the cluster's namespace, as the cluster's admin: the
// operator's own RBAC is kube-prometheus-stack's business, not what these tests prove. The
// operator is tracked by the cluster, so Cluster.Stop ends it.
func StartOperator(ctx context.Context, c *cluster.Cluster, dir string) error {
	bin := filepath.Join(dir, "operator")
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("the Prometheus Operator: %w (build it with test/promoperator/build.sh and set %s to the directory it prints)", err, OperatorDirEnv)
	}
	if err := applyCRDs(ctx, c, filepath.Join(dir, "crds")); err != nil {
		return err
	}
	cmd := c.Command(context.Background(), bin,
		"--web.listen-address=127.0.0.1:18080",
		"--log-level=debug")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.KubeconfigPath())
	if err := c.StartProcess("prometheus-operator", cmd); err != nil {
		return err
	}
	c.Logf("prometheus-operator started (log %s)", c.LogPath("prometheus-operator"))
	return nil
}

// applyCRDs server-side applies every CRD in dir and waits until each is Established.
func applyCRDs(ctx context.Context, c *cluster.Cluster, dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no CRDs in %s: %w", dir, errors.Join(err, errors.New("no *.yaml files")))
	}
	dyn, err := dynamic.NewForConfig(c.RESTConfig())
	if err != nil {
		return err
	}
	crds := dyn.Resource(crdResource)
	force := true
	var names []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		var u unstructured.Unstructured
		if err := yaml.Unmarshal(b, &u.Object); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		data, err := u.MarshalJSON()
		if err != nil {
			return err
		}
		if _, err := crds.Patch(ctx, u.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{FieldManager: "emptydir-guard-e2e", Force: &force}); err != nil {
			return fmt.Errorf("apply CRD %s: %w", u.GetName(), err)
		}
		names = append(names, u.GetName())
	}
	for _, name := range names {
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			// Not there yet is no error: poll again.
			got, err := crds.Get(ctx, name, metav1.GetOptions{})
			var conds []any
			if err == nil {
				conds, _, _ = unstructured.NestedSlice(got.Object, "status", "conditions")
			}
			for _, cond := range conds {
				m, _ := cond.(map[string]any)
				if m["type"] == "Established" && m["status"] == "True" {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("CRD %s not Established: %w", name, err)
		}
	}
	return nil
}

// OperatorStackOptions names the Prometheus and Alertmanager objects whose operator-made
// StatefulSets StartFromOperator runs.
type OperatorStackOptions struct {
	Prometheus, Alertmanager types.NamespacedName
	// PrometheusServiceAccountToken is the bearer token Prometheus's service discovery uses
	// (a TokenRequest of the Prometheus object's ServiceAccount): the kubelet would mount it.
	PrometheusServiceAccountToken string
	// Hosts maps DNS names to addresses for Alertmanager, standing in for the cluster DNS and
	// kube-proxy this cluster does not run (a Service's name → one of its pods' IPs).
	Hosts map[string]string
	// PrometheusBin and AlertmanagerBin default to the Debian packages' binaries; Prometheus
	// needs one with Kubernetes service discovery (OperatorPrometheus).
	PrometheusBin, AlertmanagerBin string
	// ReadyTimeout bounds the wait for the operator's output and for both to be ready;
	// default 2m.
	ReadyTimeout time.Duration
	// PrometheusReady and AlertmanagerReady, if set, hold each start until the operator's
	// output satisfies them: they get the text of every file laid out for the pod (generated
	// configuration, rule files) and name what is missing. Objects created after the operator
	// first reconciled reach its output seconds later, and these processes do not reload as
	// the config-reloader would.
	PrometheusReady, AlertmanagerReady func(files string) error
}

// StartFromOperator runs Prometheus and Alertmanager exactly as the Prometheus Operator
// configured them: for each, it waits for the StatefulSet the operator made, lays out the
// files of its volumes (the operator's generated configuration Secret, rule ConfigMaps, web
// and TLS configs) from the API, does what its config-reloader init container does
// (decompress, substitute $(VARS)), and starts the binary with the container's own
// arguments inside the cluster's namespace. The files live under WorkDir instead of the
// pod's paths: arguments and the generated configuration are rewritten from the mount paths
// to those directories and nothing else. Prometheus gets the ServiceAccount token where
// client-go's in-cluster configuration reads it, in a mount namespace of its own.
func StartFromOperator(ctx context.Context, c *cluster.Cluster, o OperatorStackOptions) (*Stack, error) {
	if o.PrometheusBin == "" {
		o.PrometheusBin = DefaultPrometheusBin
	}
	if o.AlertmanagerBin == "" {
		o.AlertmanagerBin = DefaultAlertmanagerBin
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = 2 * time.Minute
	}
	dir, err := workDir(c, "operator-stack-")
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, o.ReadyTimeout)
	defer cancel()

	prom, err := preparePodWhen(wctx, c, filepath.Join(dir, "prometheus"), o.Prometheus.Namespace, "prometheus-"+o.Prometheus.Name, "prometheus", o.PrometheusReady)
	if err != nil {
		return nil, fmt.Errorf("the operator's Prometheus: %w", err)
	}
	am, err := preparePodWhen(wctx, c, filepath.Join(dir, "alertmanager"), o.Alertmanager.Namespace, "alertmanager-"+o.Alertmanager.Name, "alertmanager", o.AlertmanagerReady)
	if err != nil {
		return nil, fmt.Errorf("the operator's Alertmanager: %w", err)
	}

	hosts, err := hostsFile(dir, o.Hosts)
	if err != nil {
		return nil, err
	}
	saDir := filepath.Join(dir, "serviceaccount")
	if err := writeServiceAccount(saDir, o.PrometheusServiceAccountToken, c.CAFile(), o.Prometheus.Namespace); err != nil {
		return nil, err
	}
	api, err := apiServerEnv(c)
	if err != nil {
		return nil, err
	}

	m := &Stack{procs: processes{c: c},
		PrometheusAddr: listenAddr(prom.args, "web.listen-address", ":9090"), AlertmanagerAddr: listenAddr(am.args, "web.listen-address", ":9093"),
		PrometheusConfigFile: prom.configFile, AlertmanagerConfigFile: am.configFile}
	if err := m.connect(c); err != nil {
		return nil, err
	}
	// Alertmanager resolves the remediator Service's name through /etc/hosts.
	if err := m.procs.startIsolated("alertmanager", o.AlertmanagerBin, am.args, nil,
		"mount --bind "+shellQuote(hosts)+" /etc/hosts"); err != nil {
		return nil, err
	}
	// Prometheus's Kubernetes service discovery reads the token and CA where the kubelet
	// mounts them, at paths client-go fixes; /var/run is /run here.
	if err := m.procs.startIsolated("prometheus", o.PrometheusBin, prom.args, api,
		"mount -t tmpfs tmpfs /run && mkdir -p /run/secrets/kubernetes.io && cp -r "+shellQuote(saDir)+" /run/secrets/kubernetes.io/serviceaccount"); err != nil {
		m.Stop()
		return nil, err
	}
	for _, w := range []struct{ name, url string }{
		{"prometheus", m.PrometheusURL() + "/-/ready"},
		{"alertmanager", m.AlertmanagerURL() + "/-/ready"},
	} {
		if err := waitReady(wctx, c.HTTPClient(nil), w.url); err != nil {
			m.Stop()
			return nil, fmt.Errorf("%s not ready: %w\n%s", w.name, err, c.LogTail(w.name, 3000))
		}
	}
	c.Logf("the operator's prometheus at %s, alertmanager at %s (configs %s, %s)", m.PrometheusURL(), m.AlertmanagerURL(), prom.configFile, am.configFile)
	return m, nil
}

// apiServerEnv is what the kubelet gives every container for in-cluster configuration; the
// API server's own address, since no kube-proxy routes the kubernetes Service here.
func apiServerEnv(c *cluster.Cluster) ([]string, error) {
	host, port, err := splitURLHostPort(c.APIServerURL())
	if err != nil {
		return nil, err
	}
	return []string{"KUBERNETES_SERVICE_HOST=" + host, "KUBERNETES_SERVICE_PORT=" + port}, nil
}

func writeServiceAccount(dir, token, caFile, namespace string) error {
	if token == "" {
		return errors.New("no ServiceAccount token for Prometheus")
	}
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, data := range map[string][]byte{"token": []byte(token), "ca.crt": ca, "namespace": []byte(namespace)} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// hostsFile writes the host's /etc/hosts plus the given names.
func hostsFile(dir string, names map[string]string) (string, error) {
	base, err := os.ReadFile("/etc/hosts")
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	var b strings.Builder
	b.Write(base)
	for name, ip := range names {
		fmt.Fprintf(&b, "\n%s %s", ip, name)
	}
	b.WriteString("\n")
	p := filepath.Join(dir, "hosts")
	return p, os.WriteFile(p, []byte(b.String()), 0o644)
}

// waitObject polls get until it finds the object, for the operator's output.
func waitObject[T any](ctx context.Context, what string, get func(context.Context) (T, error)) (T, error) {
	var got T
	var last error
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		got, last = get(ctx)
		if apierrors.IsNotFound(last) {
			return false, nil
		}
		return last == nil, nil
	})
	if err != nil {
		return got, fmt.Errorf("%s: %w (last: %w)", what, err, last)
	}
	return got, nil
}
