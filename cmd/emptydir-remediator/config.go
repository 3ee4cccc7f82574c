package main

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/alecthomas/units"
	"github.com/prometheus/common/promslog"
	promslogflag "github.com/prometheus/common/promslog/flag"
	"github.com/prometheus/common/version"
	"github.com/prometheus/exporter-toolkit/web"
	"github.com/prometheus/exporter-toolkit/web/kingpinflag"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/emptydir-guard/emptydir-guard/internal/httpserver"
	"github.com/emptydir-guard/emptydir-guard/internal/kubeclient"
	"github.com/emptydir-guard/emptydir-guard/internal/liveapi"
	"github.com/emptydir-guard/emptydir-guard/remediator"
)

const (
	defaultListenAddress = ":9732"
	// defaultMeasureTimeout lets a live walk of a big volume finish: the exporter bounds a
	// live walk at 30 s and then answers 503 itself, which says more than a cut connection.
	// It is independent of --measurement.max-age, which is judged on the walk's end.
	defaultMeasureTimeout = 35 * time.Second
)

const serviceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// config is everything the command line sets. The flags write into the library's own
// configurations (remediator.Config, remediator.LeaderElectionConfig, kubeclient.Config);
// the rest is how the command builds the live measurer and the ledger.
type config struct {
	web *web.FlagConfig
	// maxConnections bounds the connections the HTTP server holds open (--web.max-connections).
	maxConnections *int
	log            promslog.Config

	remediator     remediator.Config
	kube           kubeclient.Config
	measurement    measurementConfig
	leaderElection remediator.LeaderElectionConfig
	// ledgerConfigMap keeps the ledger in a ConfigMap of the Lease's namespace; empty: memory.
	ledgerConfigMap string
}

// measurementConfig says where live measurements come from.
type measurementConfig struct {
	source  string
	timeout time.Duration

	exporterURL        string
	exporterNamespace  string
	exporterSelector   string
	exporterScheme     string
	exporterPort       int
	exporterHTTPConfig string
}

// defaultConfig is the one place of the command's defaults: the flags show and apply them.
func defaultConfig() config {
	return config{
		remediator: remediator.DefaultConfig(),
		kube:       kubeclient.Config{QPS: 20, Burst: 40},
		measurement: measurementConfig{
			source:           remediator.SourceExporter,
			timeout:          defaultMeasureTimeout,
			exporterSelector: "app.kubernetes.io/name=emptydir-exporter",
			exporterScheme:   "http",
			exporterPort:     liveapi.DefaultPort,
		},
		leaderElection: remediator.LeaderElectionConfig{
			Name:          remediator.Component,
			LeaseDuration: 15 * time.Second,
			RenewDeadline: 10 * time.Second,
			RetryPeriod:   2 * time.Second,
		},
		ledgerConfigMap: remediator.Component + "-ledger",
	}
}

// newApp declares the flags, bound to cfg and defaulting to what cfg holds (defaultConfig).
func newApp(cfg *config) *kingpin.Application {
	app := kingpin.New("emptydir-remediator", "Evicts pods whose emptyDir volumes are over their sizeLimit, on Alertmanager webhooks, after a live re-check and policy.")
	app.Version(version.Print("emptydir-remediator"))
	app.HelpFlag.Short('h')
	rc, m, lec := &cfg.remediator, &cfg.measurement, &cfg.leaderElection
	def := func(v any) string { return fmt.Sprint(v) }

	cfg.web = kingpinflag.AddFlags(app, defaultListenAddress)
	cfg.maxConnections = httpserver.AddMaxConnectionsFlag(app, maxConnections)
	promslogflag.AddFlags(app, &cfg.log)
	app.Flag("web.webhook-path", "Path of the Alertmanager webhook.").
		Default(rc.WebhookPath).StringVar(&rc.WebhookPath)
	app.Flag("web.max-request-size", "Largest webhook body accepted; larger ones get 413.").
		Default(def(units.Base2Bytes(rc.MaxRequestBytes))).BytesVar((*units.Base2Bytes)(&rc.MaxRequestBytes))
	app.Flag("web.bearer-token-file", "File with the bearer token Alertmanager must send on the webhook, re-read on change; at least 32 bytes. Empty: none required.").
		Default(rc.BearerTokenFile).StringVar(&rc.BearerTokenFile)
	app.Flag("web.alert-timeout", "Time allowed to handle one alert (pod GET, live measurement, eviction).").
		Default(def(rc.AlertTimeout)).DurationVar(&rc.AlertTimeout)

	cfg.kube.AddFlags(app)

	app.Flag("measurement.source", "Where live measurements come from: exporter (its live endpoint on the pod's node) or kubelet (Summary API through the API server's node proxy).").
		Default(m.source).EnumVar(&m.source, remediator.SourceExporter, remediator.SourceKubelet)
	app.Flag("measurement.timeout", "Timeout of one live measurement request: long enough for the walk of a big volume; shorter than --web.alert-timeout.").
		Default(def(m.timeout)).DurationVar(&m.timeout)
	app.Flag("measurement.max-age", "Oldest live measurement acted on, counted from the end of its walk; older ones are rejected and the alert is retried.").
		Default(def(rc.MaxMeasurementAge)).DurationVar(&rc.MaxMeasurementAge)
	app.Flag("exporter.url", "Static base URL of the exporter (single-node clusters, testing); overrides the discovery of the exporter pod on the pod's node.").
		Default(m.exporterURL).StringVar(&m.exporterURL)
	app.Flag("exporter.namespace", "Namespace of the exporter pods; empty: the remediator's own namespace ($POD_NAMESPACE, else the service account's).").
		Default(m.exporterNamespace).StringVar(&m.exporterNamespace)
	app.Flag("exporter.selector", "Label selector of the exporter pods.").
		Default(m.exporterSelector).StringVar(&m.exporterSelector)
	app.Flag("exporter.scheme", "Scheme to reach the exporter pods with: http or https.").
		Default(m.exporterScheme).EnumVar(&m.exporterScheme, "http", "https")
	app.Flag("exporter.port", "Port of the exporter's web server on its pod IP.").
		Default(def(m.exporterPort)).IntVar(&m.exporterPort)
	app.Flag("exporter.http-config.file", "Prometheus HTTP client configuration file (TLS, basic auth, authorization) to reach the exporter with; credentials in it are refused over http.").
		Default(m.exporterHTTPConfig).StringVar(&m.exporterHTTPConfig)

	app.Flag("policy.namespace-allow", "Only remediate these namespaces (repeatable). Default: all.").
		StringsVar(&rc.NamespaceAllow)
	app.Flag("policy.namespace-deny", "Never remediate these namespaces (repeatable); wins over --policy.namespace-allow.").
		StringsVar(&rc.NamespaceDeny)
	app.Flag("policy.pod-selector", "Only remediate pods whose labels match this selector.").
		Default("").SetValue(&selectorValue{sel: &rc.PodSelector})
	app.Flag("policy.opt-out-annotation", "Pods with this annotation set to \"false\" are never evicted, in the namespaces --policy.opt-out-namespace-selector selects.").
		Default(rc.OptOutAnnotation).StringVar(&rc.OptOutAnnotation)
	app.Flag("policy.opt-out-namespace-selector", "Label selector of the namespaces where the opt-out annotation is honoured; empty: nowhere. Select with labels tenants cannot set.").
		Default(selectorText(rc.OptOutNamespaceSelector)).SetValue(&selectorValue{sel: &rc.OptOutNamespaceSelector})
	app.Flag("policy.allow-mirror-pods", "Also evict static (mirror) pods. Evicting them does not stop them.").
		Default(def(rc.AllowMirrorPods)).BoolVar(&rc.AllowMirrorPods)
	app.Flag("policy.allow-daemonset-pods", "Also evict DaemonSet pods in the namespaces --policy.daemonset-namespace-selector selects (elsewhere they are evicted as any pod).").
		Default(def(rc.AllowDaemonSetPods)).BoolVar(&rc.AllowDaemonSetPods)
	app.Flag("policy.daemonset-namespace-selector", "Label selector of the namespaces where DaemonSet pods are not evicted; empty: none. As for --policy.opt-out-namespace-selector.").
		Default(selectorText(rc.DaemonSetNamespaceSelector)).SetValue(&selectorValue{sel: &rc.DaemonSetNamespaceSelector})
	app.Flag("policy.allow-critical-pods", "Also evict system-critical pods (system-node-critical, system-cluster-critical, priority >= 2000000000).").
		Default(def(rc.AllowCriticalPods)).BoolVar(&rc.AllowCriticalPods)

	app.Flag("policy.evict-incomplete-after", "Also evict a pod whose usage has been measured only as a lower bound under its limit for this long; 0: off (docs/remediator.md#incomplete-measurements).").
		Default(def(rc.EvictIncompleteAfter)).DurationVar(&rc.EvictIncompleteAfter)

	app.Flag("eviction.dry-run", "Do everything except the Eviction API call: re-check, policy, Events (\"dry run: would evict\"), metrics, audit log.").
		Default(def(rc.DryRun)).BoolVar(&rc.DryRun)
	app.Flag("eviction.threshold-ratio", "Evict when the live usage exceeds sizeLimit × this ratio.").
		Default(def(rc.ThresholdRatio)).Float64Var(&rc.ThresholdRatio)
	app.Flag("eviction.cooldown", "After an eviction (or dry-run eviction) of a pod UID, ignore further alerts for it this long.").
		Default(def(rc.Cooldown)).DurationVar(&rc.Cooldown)
	app.Flag("eviction.max-per-node", "At most this many evictions per node within --eviction.cap-window (0: no cap).").
		Default(def(rc.Caps.PerNode)).IntVar(&rc.Caps.PerNode)
	app.Flag("eviction.max-per-namespace", "At most this many evictions per namespace within --eviction.cap-window (0: no cap).").
		Default(def(rc.Caps.PerNamespace)).IntVar(&rc.Caps.PerNamespace)
	app.Flag("eviction.max-global", "At most this many evictions in total within --eviction.cap-window (0: no cap).").
		Default(def(rc.Caps.Global)).IntVar(&rc.Caps.Global)
	app.Flag("eviction.cap-window", "Sliding window of the eviction caps.").
		Default(def(rc.Caps.Window)).DurationVar(&rc.Caps.Window)
	app.Flag("eviction.grace-period", "Grace period in seconds for evicted pods; -1 uses the pod's terminationGracePeriodSeconds.").
		Default(def(rc.GracePeriodSeconds)).Int64Var(&rc.GracePeriodSeconds)

	nc := &rc.Notices
	app.Flag("notice.service-account", "ServiceAccount (namespace/name) of the exporter, whose tokens alone may post notices of a part over its limit (TokenReview); empty: no notices, the alerts alone.").
		Default(nc.ServiceAccount).StringVar(&nc.ServiceAccount)
	app.Flag("notice.audience", "Audience the exporter's token must be issued for.").
		Default(nc.Audience).StringVar(&nc.Audience)
	app.Flag("notice.max-per-namespace", "Notices handled a minute about the pods of one namespace; more get 429.").
		Default(def(nc.PerNamespace)).IntVar(&nc.PerNamespace)
	app.Flag("notice.max-per-node", "Notices handled a minute from one node's exporter; more get 429.").
		Default(def(nc.PerNode)).IntVar(&nc.PerNode)

	app.Flag("leader-elect.enabled", "Run leader election on a Lease; only the leader acts, standbys forward webhooks to it (or answer 503).").
		Default(def(rc.LeaderElection)).BoolVar(&rc.LeaderElection)
	app.Flag("leader-elect.lease-namespace", "Namespace of the Lease; empty: the remediator's own namespace.").
		Default(lec.Namespace).StringVar(&lec.Namespace)
	app.Flag("leader-elect.lease-name", "Name of the Lease.").
		Default(lec.Name).StringVar(&lec.Name)
	app.Flag("leader-elect.identity", "Identity of this replica in the Lease; empty: $POD_NAME, else the host name.").
		Default(lec.Identity).StringVar(&lec.Identity)
	app.Flag("leader-elect.lease-duration", "Lease duration.").
		Default(def(lec.LeaseDuration)).DurationVar(&lec.LeaseDuration)
	app.Flag("leader-elect.renew-deadline", "Time the leader keeps trying to renew before giving up leadership.").
		Default(def(lec.RenewDeadline)).DurationVar(&lec.RenewDeadline)
	app.Flag("leader-elect.retry-period", "Time between attempts to acquire or renew the Lease.").
		Default(def(lec.RetryPeriod)).DurationVar(&lec.RetryPeriod)
	app.Flag("ledger.configmap", "ConfigMap in the Lease's namespace keeping the evictions counted against the caps and cooldown, across replicas and restarts; empty: in memory only.").
		Default(cfg.ledgerConfigMap).StringVar(&cfg.ledgerConfigMap)

	return app
}

// selectorValue is a label selector flag; empty is nil (for --policy.pod-selector: every pod;
// for the namespace selectors of exemptions: no namespace).
type selectorValue struct {
	sel  *labels.Selector
	text string
}

func (v *selectorValue) Set(s string) error {
	if s == "" {
		*v.sel, v.text = nil, ""
		return nil
	}
	sel, err := labels.Parse(s)
	if err != nil {
		return err
	}
	*v.sel, v.text = sel, s
	return nil
}

func (v *selectorValue) String() string { return v.text }

// selectorText is a flag's default for sel: nil is empty.
func selectorText(sel labels.Selector) string {
	if sel == nil {
		return ""
	}
	return sel.String()
}

// fillDefaults fills namespaces and the identity left empty from the pod's environment.
func fillDefaults(c *config) {
	own := os.Getenv("POD_NAMESPACE")
	if own == "" {
		if b, err := os.ReadFile(serviceAccountNamespaceFile); err == nil {
			own = strings.TrimSpace(string(b))
		}
	}
	if c.measurement.exporterNamespace == "" {
		c.measurement.exporterNamespace = own
	}
	if c.leaderElection.Namespace == "" {
		c.leaderElection.Namespace = own
	}
	if c.leaderElection.Identity == "" {
		c.leaderElection.Identity = os.Getenv("POD_NAME")
	}
	if c.leaderElection.Identity == "" {
		c.leaderElection.Identity, _ = os.Hostname()
	}
}

// validate reports every problem of the flags at once. It is pure: files named by flags are
// read later. Namespaces left empty must have been filled in from the pod's own before.
func validate(c *config) error {
	var errs []error
	if err := c.remediator.Validate(); err != nil {
		errs = append(errs, err)
	}
	m := c.measurement
	if m.timeout <= 0 {
		errs = append(errs, fmt.Errorf("--measurement.timeout %s must be positive", m.timeout))
	} else if m.timeout >= c.remediator.AlertTimeout {
		errs = append(errs, fmt.Errorf("--measurement.timeout %s must be shorter than --web.alert-timeout %s", m.timeout, c.remediator.AlertTimeout))
	}
	if c.remediator.GracePeriodSeconds < -1 {
		errs = append(errs, fmt.Errorf("--eviction.grace-period %d must be -1 (the pod's own) or more", c.remediator.GracePeriodSeconds))
	}
	if err := c.kube.Validate(); err != nil {
		errs = append(errs, err)
	}
	if m.source == remediator.SourceExporter {
		if m.exporterURL != "" {
			u, err := url.Parse(m.exporterURL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				errs = append(errs, fmt.Errorf("--exporter.url %q must be an absolute http(s) URL", m.exporterURL))
			}
		} else {
			if m.exporterNamespace == "" {
				errs = append(errs, errors.New("--exporter.namespace is required (or --exporter.url) outside a pod"))
			}
			if strings.TrimSpace(m.exporterSelector) == "" {
				errs = append(errs, errors.New("--exporter.selector must not be empty: it would match every pod of the namespace"))
			} else if _, err := labels.Parse(m.exporterSelector); err != nil {
				errs = append(errs, fmt.Errorf("--exporter.selector %q: %w", m.exporterSelector, err))
			}
			if m.exporterPort < 1 || m.exporterPort > 65535 {
				errs = append(errs, fmt.Errorf("--exporter.port %d is not a port", m.exporterPort))
			}
		}
	}
	if c.remediator.LeaderElection {
		lec := c.leaderElection
		if lec.Namespace == "" || lec.Name == "" || lec.Identity == "" {
			errs = append(errs, errors.New("--leader-elect.enabled needs a lease namespace, name and identity"))
		}
		if c.ledgerConfigMap == "" {
			errs = append(errs, errors.New("--leader-elect.enabled needs --ledger.configmap: replicas must share the caps and cooldowns"))
		}
		if lec.LeaseDuration <= lec.RenewDeadline {
			errs = append(errs, fmt.Errorf("--leader-elect.lease-duration %s must be longer than --leader-elect.renew-deadline %s", lec.LeaseDuration, lec.RenewDeadline))
		}
		// client-go's leader elector wants RenewDeadline > 1.2 × RetryPeriod.
		if lec.RetryPeriod <= 0 || float64(lec.RenewDeadline) <= 1.2*float64(lec.RetryPeriod) {
			errs = append(errs, fmt.Errorf("--leader-elect.renew-deadline %s must be longer than 1.2 × --leader-elect.retry-period %s", lec.RenewDeadline, lec.RetryPeriod))
		}
	}
	return errors.Join(errs...)
}
