package main

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/alecthomas/units"
	promconfig "github.com/prometheus/common/config"
	"github.com/prometheus/common/promslog"
	promslogflag "github.com/prometheus/common/promslog/flag"
	"github.com/prometheus/common/version"
	"github.com/prometheus/exporter-toolkit/web"
	"github.com/prometheus/exporter-toolkit/web/kingpinflag"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"

	"github.com/emptydir-guard/emptydir-guard/internal/cliflag"
	"github.com/emptydir-guard/emptydir-guard/remediator"
)

const (
	defaultListenAddress = ":9732"
	defaultExporterPort  = 9731
	// defaultMeasureTimeout lets a live walk of a big volume finish: the exporter bounds a
	// live walk at 30 s and then answers 503 itself, which says more than a cut connection.
	// It is independent of --max-measurement-age, which is judged on the walk's end.
	defaultMeasureTimeout = 35 * time.Second
)

// config is everything the flags say.
type config struct {
	webhookPath      string
	maxRequestBytes  units.Base2Bytes
	bearerTokenFile  string
	alertTimeout     time.Duration
	kubeconfig       string
	kubeAPIQPS       float32
	kubeAPIBurst     int
	dryRun           bool
	thresholdRatio   float64
	maxAge           time.Duration
	source           string
	measureTimeout   time.Duration
	exporterURL      string
	exporterNS       string
	exporterSelector string
	exporterScheme   string
	exporterPort     int
	exporterHTTPCfg  string
	namespaceAllow   []string
	namespaceDeny    []string
	podSelector      string
	optOutAnnotation string
	allowMirror      bool
	allowDaemonSet   bool
	allowCritical    bool
	cooldown         time.Duration
	maxPerNode       int
	maxPerNamespace  int
	maxGlobal        int
	capWindow        time.Duration
	gracePeriod      int64
	leaderElect      bool
	leaseNamespace   string
	leaseName        string
	leaseIdentity    string
	leaseDuration    time.Duration
	renewDeadline    time.Duration
	retryPeriod      time.Duration
	ledgerConfigMap  string
}

// parseFlags parses args into the configuration, the logging and the web flags.
func parseFlags(args []string) (*config, *promslog.Config, *web.FlagConfig, error) {
	app := kingpin.New("emptydir-remediator", "Evicts pods whose emptyDir volumes are over their sizeLimit, on Alertmanager webhooks, after a live re-check and policy.")
	c := &config{}
	d := remediator.DefaultConfig()
	webFlags := kingpinflag.AddFlags(app, defaultListenAddress)
	app.Flag("web.webhook-path", "Path of the Alertmanager webhook.").Default(d.WebhookPath).StringVar(&c.webhookPath)
	app.Flag("web.max-request-size", "Largest webhook body accepted; larger ones get 413.").Default("1MiB").BytesVar(&c.maxRequestBytes)
	app.Flag("web.bearer-token-file", "File holding the bearer token Alertmanager must send on the webhook (http_config.authorization). Empty: no bearer token required.").Default("").StringVar(&c.bearerTokenFile)
	app.Flag("web.alert-timeout", "Time allowed to handle one alert (pod GET, live measurement, eviction).").Default(d.AlertTimeout.String()).DurationVar(&c.alertTimeout)

	app.Flag("kubeconfig", "Path to a kubeconfig; empty uses the in-cluster configuration.").Default("").StringVar(&c.kubeconfig)
	app.Flag("kube-api-qps", "Queries per second to the API server.").Default("20").Float32Var(&c.kubeAPIQPS)
	app.Flag("kube-api-burst", "Burst of queries to the API server.").Default("40").IntVar(&c.kubeAPIBurst)

	app.Flag("dry-run", "Do everything except the Eviction API call: re-check, policy, Events (\"dry run: would evict\"), metrics, audit log.").Default("false").BoolVar(&c.dryRun)
	app.Flag("threshold-ratio", "Evict when the live usage exceeds sizeLimit × this ratio.").Default("1.0").Float64Var(&c.thresholdRatio)
	app.Flag("max-measurement-age", "Oldest live measurement acted on, counted from the end of its walk; older ones are rejected and the alert is retried.").Default(d.MaxMeasurementAge.String()).DurationVar(&c.maxAge)
	app.Flag("measurement.source", "Where live measurements come from: exporter (its live endpoint on the pod's node) or kubelet (Summary API through the API server's node proxy).").Default(remediator.SourceExporter).EnumVar(&c.source, remediator.SourceExporter, remediator.SourceKubelet)
	app.Flag("measurement.timeout", "Timeout of one live measurement request: long enough for the walk of a big volume; shorter than --web.alert-timeout.").Default(defaultMeasureTimeout.String()).DurationVar(&c.measureTimeout)
	app.Flag("exporter.url", "Static base URL of the exporter (single-node clusters, testing); overrides the discovery of the exporter pod on the pod's node.").Default("").StringVar(&c.exporterURL)
	app.Flag("exporter.namespace", "Namespace of the exporter pods; empty: the remediator's own namespace.").Default("").StringVar(&c.exporterNS)
	app.Flag("exporter.selector", "Label selector of the exporter pods.").Default("app.kubernetes.io/name=emptydir-exporter").StringVar(&c.exporterSelector)
	app.Flag("exporter.scheme", "Scheme to reach the exporter pods with.").Default("http").EnumVar(&c.exporterScheme, "http", "https")
	app.Flag("exporter.port", "Port of the exporter's web server on its pod IP.").Default(fmt.Sprint(defaultExporterPort)).IntVar(&c.exporterPort)
	app.Flag("exporter.http-config.file", "Prometheus HTTP client configuration file (TLS, basic auth, authorization) to reach the exporter with.").Default("").StringVar(&c.exporterHTTPCfg)

	app.Flag("namespace-allow", "Only remediate these namespaces (repeatable). Default: all.").StringsVar(&c.namespaceAllow)
	app.Flag("namespace-deny", "Never remediate these namespaces (repeatable); wins over --namespace-allow.").StringsVar(&c.namespaceDeny)
	app.Flag("pod-selector", "Only remediate pods whose labels match this selector.").Default("").StringVar(&c.podSelector)
	app.Flag("opt-out-annotation", "Pods with this annotation set to \"false\" are never evicted.").Default(d.OptOutAnnotation).StringVar(&c.optOutAnnotation)
	app.Flag("allow-mirror-pods", "Also evict static (mirror) pods. Evicting them does not stop them.").Default("false").BoolVar(&c.allowMirror)
	app.Flag("allow-daemonset-pods", "Also evict DaemonSet pods.").Default("false").BoolVar(&c.allowDaemonSet)
	app.Flag("allow-critical-pods", "Also evict system-critical pods (system-node-critical, system-cluster-critical, priority >= 2000000000).").Default("false").BoolVar(&c.allowCritical)
	app.Flag("cooldown", "After an eviction (or dry-run eviction) of a pod UID, ignore further alerts for it this long.").Default(d.Cooldown.String()).DurationVar(&c.cooldown)
	app.Flag("max-evictions-per-node", "At most this many evictions per node within --cap-window (0: no cap).").Default(fmt.Sprint(d.Caps.PerNode)).IntVar(&c.maxPerNode)
	app.Flag("max-evictions-per-namespace", "At most this many evictions per namespace within --cap-window (0: no cap).").Default(fmt.Sprint(d.Caps.PerNamespace)).IntVar(&c.maxPerNamespace)
	app.Flag("max-evictions", "At most this many evictions in total within --cap-window (0: no cap).").Default(fmt.Sprint(d.Caps.Global)).IntVar(&c.maxGlobal)
	app.Flag("cap-window", "Sliding window of the eviction caps.").Default(d.Caps.Window.String()).DurationVar(&c.capWindow)
	app.Flag("eviction.grace-period", "Grace period in seconds for evicted pods; -1 uses the pod's terminationGracePeriodSeconds.").Default("-1").Int64Var(&c.gracePeriod)

	app.Flag("leader-elect", "Run leader election on a Lease; only the leader acts, standbys answer webhooks with 503.").Default("false").BoolVar(&c.leaderElect)
	app.Flag("leader-elect.lease-namespace", "Namespace of the Lease; empty: the remediator's own namespace.").Default("").StringVar(&c.leaseNamespace)
	app.Flag("leader-elect.lease-name", "Name of the Lease.").Default("emptydir-remediator").StringVar(&c.leaseName)
	app.Flag("leader-elect.identity", "Identity of this replica in the Lease; empty: the host (pod) name.").Default("").StringVar(&c.leaseIdentity)
	app.Flag("leader-elect.lease-duration", "Lease duration.").Default("15s").DurationVar(&c.leaseDuration)
	app.Flag("leader-elect.renew-deadline", "Time the leader keeps trying to renew before giving up leadership.").Default("10s").DurationVar(&c.renewDeadline)
	app.Flag("leader-elect.retry-period", "Time between attempts to acquire or renew the Lease.").Default("2s").DurationVar(&c.retryPeriod)
	app.Flag("ledger.configmap", "ConfigMap in the Lease's namespace (--leader-elect.lease-namespace) that keeps the evictions counted against the caps and cooldown, shared by the replicas and kept across restarts; empty, or no namespace outside a pod: in memory only.").Default("emptydir-remediator-ledger").StringVar(&c.ledgerConfigMap)

	logCfg := &promslog.Config{}
	promslogflag.AddFlags(app, logCfg)
	app.Version(version.Print("emptydir-remediator"))
	app.HelpFlag.Short('h')
	if err := cliflag.Parse(app, args); err != nil {
		return nil, nil, nil, err
	}
	return c, logCfg, webFlags, nil
}

// remediatorConfig turns the flags into the package configuration.
func (c *config) remediatorConfig() (remediator.Config, error) {
	sel, err := labels.Parse(c.podSelector)
	if err != nil {
		return remediator.Config{}, fmt.Errorf("--pod-selector %q: %w", c.podSelector, err)
	}
	if c.podSelector == "" {
		sel = nil
	}
	return remediator.Config{
		WebhookPath:        c.webhookPath,
		MaxRequestBytes:    int64(c.maxRequestBytes),
		AlertTimeout:       c.alertTimeout,
		DryRun:             c.dryRun,
		ThresholdRatio:     c.thresholdRatio,
		MaxMeasurementAge:  c.maxAge,
		NamespaceAllow:     c.namespaceAllow,
		NamespaceDeny:      c.namespaceDeny,
		PodSelector:        sel,
		OptOutAnnotation:   c.optOutAnnotation,
		AllowMirrorPods:    c.allowMirror,
		AllowDaemonSetPods: c.allowDaemonSet,
		AllowCriticalPods:  c.allowCritical,
		Cooldown:           c.cooldown,
		Caps:               remediator.Caps{PerNode: c.maxPerNode, PerNamespace: c.maxPerNamespace, Global: c.maxGlobal, Window: c.capWindow},
		GracePeriodSeconds: c.gracePeriod,
		LeaderElection:     c.leaderElect,
	}, nil
}

// validate reports every problem of the flags at once. It is pure: files named by flags are
// read later. Namespaces left empty must have been filled in from the pod's own before.
func validate(c *config) error {
	var errs []error
	rc, err := c.remediatorConfig()
	if err != nil {
		errs = append(errs, err)
	} else if err := rc.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.measureTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--measurement.timeout %s must be positive", c.measureTimeout))
	} else if c.measureTimeout >= c.alertTimeout {
		errs = append(errs, fmt.Errorf("--measurement.timeout %s must be shorter than --web.alert-timeout %s", c.measureTimeout, c.alertTimeout))
	}
	if c.gracePeriod < -1 {
		errs = append(errs, fmt.Errorf("--eviction.grace-period %d must be -1 (the pod's own) or more", c.gracePeriod))
	}
	if c.kubeAPIQPS <= 0 || c.kubeAPIBurst <= 0 {
		errs = append(errs, errors.New("--kube-api-qps and --kube-api-burst must be positive"))
	}
	if c.source == remediator.SourceExporter {
		if c.exporterURL != "" {
			u, err := url.Parse(c.exporterURL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				errs = append(errs, fmt.Errorf("--exporter.url %q must be an absolute http(s) URL", c.exporterURL))
			}
		} else {
			if c.exporterNS == "" {
				errs = append(errs, errors.New("--exporter.namespace is required (or --exporter.url) outside a pod"))
			}
			if strings.TrimSpace(c.exporterSelector) == "" {
				errs = append(errs, errors.New("--exporter.selector must not be empty: it would match every pod of the namespace"))
			} else if _, err := labels.Parse(c.exporterSelector); err != nil {
				errs = append(errs, fmt.Errorf("--exporter.selector %q: %w", c.exporterSelector, err))
			}
			if c.exporterPort < 1 || c.exporterPort > 65535 {
				errs = append(errs, fmt.Errorf("--exporter.port %d is not a port", c.exporterPort))
			}
		}
	}
	if c.leaderElect {
		if c.leaseNamespace == "" || c.leaseName == "" || c.leaseIdentity == "" {
			errs = append(errs, errors.New("--leader-elect needs a lease namespace, name and identity"))
		}
		if c.ledgerConfigMap == "" {
			errs = append(errs, errors.New("--leader-elect needs --ledger.configmap: replicas must share the caps and cooldowns"))
		}
		if c.leaseDuration <= c.renewDeadline {
			errs = append(errs, fmt.Errorf("--leader-elect.lease-duration %s must be longer than --leader-elect.renew-deadline %s", c.leaseDuration, c.renewDeadline))
		}
		// client-go's leader elector wants RenewDeadline > 1.2 × RetryPeriod.
		if c.retryPeriod <= 0 || float64(c.renewDeadline) <= 1.2*float64(c.retryPeriod) {
			errs = append(errs, fmt.Errorf("--leader-elect.renew-deadline %s must be longer than 1.2 × --leader-elect.retry-period %s", c.renewDeadline, c.retryPeriod))
		}
	}
	return errors.Join(errs...)
}

// checkExporterCredentials refuses to send the credentials of --exporter.http-config.file
// (read after validate) to the exporter over plain http, where any host on the path reads them.
func checkExporterCredentials(c *config, hc promconfig.HTTPClientConfig) error {
	scheme, flag := c.exporterScheme, "--exporter.scheme=http"
	if c.exporterURL != "" {
		u, err := url.Parse(c.exporterURL)
		if err != nil {
			return fmt.Errorf("--exporter.url %q: %w", c.exporterURL, err)
		}
		scheme, flag = u.Scheme, fmt.Sprintf("--exporter.url=%s", c.exporterURL)
	}
	if scheme != "http" {
		return nil
	}
	if what := httpConfigCredentials(hc); what != "" {
		return fmt.Errorf("%s would send the %s of --exporter.http-config.file in clear text; use https", flag, what)
	}
	return nil
}

// httpConfigCredentials names the credentials a Prometheus HTTP client configuration sends,
// "" for none.
func httpConfigCredentials(hc promconfig.HTTPClientConfig) string {
	switch {
	case hc.Authorization != nil || hc.BearerToken != "" || hc.BearerTokenFile != "":
		return "authorization (bearer token)"
	case hc.BasicAuth != nil:
		return "basic auth password"
	case hc.OAuth2 != nil:
		return "OAuth2 token"
	}
	if hc.HTTPHeaders != nil {
		for name := range hc.HTTPHeaders.Headers {
			if strings.EqualFold(name, "Authorization") {
				return "Authorization header"
			}
		}
	}
	return ""
}

// checkKubeletCredentials refuses, with --measurement.source=kubelet, an API server reached
// over plain http with credentials: the Summary API requests would carry them in clear text.
func checkKubeletCredentials(restCfg *rest.Config) error {
	u, err := url.Parse(restCfg.Host)
	if err != nil || u.Scheme != "http" {
		return nil //nolint:nilerr // client-go defaults a host without scheme to https, and reports bad hosts itself
	}
	if restCfg.BearerToken != "" || restCfg.BearerTokenFile != "" || restCfg.Password != "" ||
		restCfg.ExecProvider != nil || restCfg.AuthProvider != nil {
		return fmt.Errorf("--measurement.source=kubelet: the API server %s of --kubeconfig is plain http but credentials would be sent to it; use https", restCfg.Host)
	}
	return nil
}
