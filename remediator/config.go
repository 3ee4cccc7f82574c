package remediator

import (
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/emptydir-guard/emptydir-guard/internal/noticeapi"
)

// Config is what the remediator does and may do. DefaultConfig gives the documented defaults.
type Config struct {
	// WebhookPath is where Alertmanager posts its webhooks.
	WebhookPath string
	// MaxRequestBytes bounds a webhook body; larger ones get 413.
	MaxRequestBytes int64
	// BearerToken, when set, is required as "Authorization: Bearer <token>" on the webhook.
	BearerToken string
	// BearerTokenFile, when set, holds that token instead; it is read again when it changes
	// (Secret rotation).
	BearerTokenFile string
	// AlertTimeout bounds the handling of one alert (pod GET, live measurement, eviction);
	// the live measurement, a walk of the volume, takes most of it.
	AlertTimeout time.Duration

	// DryRun does everything except the Eviction API call.
	DryRun bool
	// ThresholdRatio scales the sizeLimit: evict when used > sizeLimit × ThresholdRatio.
	ThresholdRatio float64
	// MaxMeasurementAge is the oldest live measurement that is acted on, counted from when
	// it was complete (the end of the walk), so that a long walk of a big volume counts.
	MaxMeasurementAge time.Duration

	// NamespaceAllow, when not empty, lists the only namespaces that are remediated.
	NamespaceAllow []string
	// NamespaceDeny lists namespaces that are never remediated; it wins over NamespaceAllow.
	NamespaceDeny []string
	// PodSelector, when set, must match the pod's labels.
	PodSelector labels.Selector
	// OptOutAnnotation set to "false" on a pod keeps the remediator away from it, in the
	// namespaces OptOutNamespaceSelector selects only: whoever writes a pod spec writes its
	// annotations, so the exemption is the cluster operator's to grant.
	OptOutAnnotation string
	// OptOutNamespaceSelector selects, by their labels, the namespaces where the opt-out
	// annotation is honoured; nil: none.
	OptOutNamespaceSelector labels.Selector
	// AllowMirrorPods, AllowDaemonSetPods and AllowCriticalPods lift the protections of
	// static (mirror) pods, DaemonSet pods and system-critical priority pods.
	AllowMirrorPods    bool
	AllowDaemonSetPods bool
	AllowCriticalPods  bool
	// DaemonSetNamespaceSelector selects the namespaces where DaemonSet pods are protected
	// (unless AllowDaemonSetPods); nil: none. Any tenant allowed to create DaemonSets could
	// otherwise run its writer as one.
	DaemonSetNamespaceSelector labels.Selector
	// EvictIncompleteAfter, when positive, evicts a pod whose emptyDir (or ephemeral storage) has
	// been measurable only as a lower bound, under its limit, for this long: when the live
	// re-check is a lower bound that the exporter says has been one, without a break, this long
	// (liveapi.Volume.IncompleteSince), on any alert about it (RemediationEvictIncomplete routes
	// one; the alert's startsAt decides nothing). 0: never; only what is proven over its limit
	// is evicted.
	EvictIncompleteAfter time.Duration
	// Cooldown: a pod UID evicted (or dry-run evicted) is not acted on again for this long.
	Cooldown time.Duration
	// Caps on evictions per node, per namespace and in total within Caps.Window.
	Caps Caps

	// GracePeriodSeconds for the evicted pod; negative uses the pod's own.
	GracePeriodSeconds int64
	// LeaderElection makes the server answer webhooks only while it is the leader; see
	// Server.RunLeaderElection.
	LeaderElection bool

	// Notices is the exporters' direct path (noticeapi.Path): off while its ServiceAccount is empty.
	Notices NoticeConfig
}

// NoticeConfig says who may post notices and how many are handled.
type NoticeConfig struct {
	// ServiceAccount ("namespace/name") is the exporter's: only its tokens, with Audience, as a
	// TokenReview finds them, are taken. Empty: the notice endpoint is off.
	ServiceAccount string
	// Audience the exporter's projected token must be issued for.
	Audience string
	// PerNamespace and PerNode bound the notices handled a minute about the pods of one
	// namespace and from the exporter of one node (a bucket of that many, refilled over the
	// minute); the rest get 429 and are left to the alerts.
	PerNamespace, PerNode int
}

// DefaultConfig returns the documented defaults. The command's flags take their defaults from
// it (docs/flags.md is generated from those flags), so it is the one place they are written.
func DefaultConfig() Config {
	return Config{
		WebhookPath:       "/webhook",
		MaxRequestBytes:   1 << 20,
		AlertTimeout:      45 * time.Second,
		ThresholdRatio:    1.0,
		MaxMeasurementAge: 5 * time.Second,
		OptOutAnnotation:  DefaultOptOutAnnotation,
		// kubernetes.io/metadata.name is set by the API server: no tenant can give it to
		// its namespace, and it needs no namespace read.
		OptOutNamespaceSelector:    systemNamespaces(),
		DaemonSetNamespaceSelector: systemNamespaces(),
		Cooldown:                   10 * time.Minute,
		Caps:                       Caps{PerNode: 5, PerNamespace: 5, Global: 20, Window: 10 * time.Minute},
		GracePeriodSeconds:         -1,
		Notices:                    NoticeConfig{Audience: noticeapi.Audience, PerNamespace: 10, PerNode: 30},
	}
}

// systemNamespaces selects kube-system, where only cluster operators create pods.
func systemNamespaces() labels.Selector {
	return labels.SelectorFromSet(labels.Set{corev1.LabelMetadataName: metav1.NamespaceSystem})
}

// Validate reports every problem of the configuration at once.
func (c Config) Validate() error {
	var errs []error
	if !strings.HasPrefix(c.WebhookPath, "/") {
		errs = append(errs, fmt.Errorf("webhook path %q must start with /", c.WebhookPath))
	}
	switch c.WebhookPath {
	case "/metrics", "/healthz", "/readyz":
		errs = append(errs, fmt.Errorf("webhook path %q collides with a built-in endpoint", c.WebhookPath))
	}
	if c.MaxRequestBytes < 1024 {
		errs = append(errs, fmt.Errorf("max request size %d must be at least 1024 bytes", c.MaxRequestBytes))
	}
	if c.BearerToken != "" && c.BearerTokenFile != "" {
		errs = append(errs, errors.New("set the bearer token or its file, not both"))
	}
	if c.AlertTimeout <= 0 {
		errs = append(errs, fmt.Errorf("alert timeout %s must be positive", c.AlertTimeout))
	}
	if c.ThresholdRatio <= 0 || c.ThresholdRatio > 100 {
		errs = append(errs, fmt.Errorf("threshold ratio %g must be in (0, 100]", c.ThresholdRatio))
	}
	if c.MaxMeasurementAge <= 0 {
		errs = append(errs, fmt.Errorf("max measurement age %s must be positive", c.MaxMeasurementAge))
	}
	for _, ns := range append(append([]string{}, c.NamespaceAllow...), c.NamespaceDeny...) {
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("namespace %q: %s", ns, strings.Join(msgs, "; ")))
		}
	}
	for _, ns := range c.NamespaceAllow {
		for _, d := range c.NamespaceDeny {
			if ns == d {
				errs = append(errs, fmt.Errorf("namespace %q is both allowed and denied", ns))
			}
		}
	}
	if c.OptOutAnnotation != "" {
		if msgs := validation.IsQualifiedName(c.OptOutAnnotation); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("opt-out annotation %q: %s", c.OptOutAnnotation, strings.Join(msgs, "; ")))
		}
	}
	if c.EvictIncompleteAfter < 0 {
		errs = append(errs, fmt.Errorf("evict-incomplete-after %s must not be negative (0: off)", c.EvictIncompleteAfter))
	}
	if c.Cooldown < 0 {
		errs = append(errs, fmt.Errorf("cooldown %s must not be negative", c.Cooldown))
	}
	if c.Caps.PerNode < 0 || c.Caps.PerNamespace < 0 || c.Caps.Global < 0 {
		errs = append(errs, errors.New("eviction caps must not be negative (0 means no cap)"))
	}
	if (c.Caps.PerNode > 0 || c.Caps.PerNamespace > 0 || c.Caps.Global > 0) && c.Caps.Window <= 0 {
		errs = append(errs, fmt.Errorf("cap window %s must be positive when a cap is set", c.Caps.Window))
	}
	errs = append(errs, c.Notices.validate()...)
	return errors.Join(errs...)
}

func (n NoticeConfig) validate() []error {
	if n.ServiceAccount == "" {
		return nil
	}
	var errs []error
	ns, name, ok := strings.Cut(n.ServiceAccount, "/")
	if !ok || len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
		errs = append(errs, fmt.Errorf("notice service account %q is not namespace/name", n.ServiceAccount))
	}
	if n.Audience == "" {
		errs = append(errs, errors.New("notice audience must not be empty"))
	}
	if n.PerNamespace < 1 || n.PerNode < 1 {
		errs = append(errs, fmt.Errorf("notices per namespace (%d) and per node (%d) a minute must be at least 1", n.PerNamespace, n.PerNode))
	}
	return errs
}
