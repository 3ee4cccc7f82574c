package main

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/common/promslog"
	promslogflag "github.com/prometheus/common/promslog/flag"
	"github.com/prometheus/common/version"
	"github.com/prometheus/exporter-toolkit/web"
	"github.com/prometheus/exporter-toolkit/web/kingpinflag"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"

	"github.com/emptydir-guard/emptydir-guard/exporter"
	"github.com/emptydir-guard/emptydir-guard/exporter/notify"
	"github.com/emptydir-guard/emptydir-guard/exporter/source"
	"github.com/emptydir-guard/emptydir-guard/internal/httpserver"
	"github.com/emptydir-guard/emptydir-guard/internal/kubeclient"
	"github.com/emptydir-guard/emptydir-guard/internal/liveapi"
	"github.com/emptydir-guard/emptydir-guard/internal/metricfilter"
	"github.com/emptydir-guard/emptydir-guard/internal/noticeapi"
	"github.com/emptydir-guard/emptydir-guard/internal/podcgroup"
)

const (
	sourceFilesystem = "filesystem"
	sourceKubelet    = "kubelet"
)

// config is everything the command line sets. The flags write into the library's own
// configurations (exporter.Config, source.Filesystem, kubeclient.Config); the rest
// is how the command builds the kubelet source and serves HTTP.
type config struct {
	web           *web.FlagConfig
	maxConns      *int // --web.max-connections
	log           promslog.Config
	telemetryPath string
	// metricAllowlist and metricDenylist are comma-separated metric family names and regular
	// expressions (--metric-allowlist, --metric-denylist), as kube-state-metrics takes them.
	metricAllowlist, metricDenylist string
	// metricOptInList names the opt-in families to publish (--metric-opt-in-list), as
	// kube-state-metrics takes it.
	metricOptInList string
	// namespaces and namespacesDenylist are comma-separated namespaces whose pods are measured,
	// or not (--namespaces, --namespaces-denylist), as kube-state-metrics takes them.
	namespaces, namespacesDenylist string
	// denyWrites takes every filesystem write from the process at start (--fs.deny-writes).
	denyWrites bool

	kube     kubeclient.Config
	source   string
	exporter exporter.Config
	// fs is the source of --collection.source=filesystem.
	fs source.Filesystem
	// changeSignal puts last (or, exporter.SkipUnchanged, spares) the walks of parts whose
	// pod's cgroup says it wrote nothing (--collection.change-signal), found as cgroup says;
	// changeSignalSet: the flag was given, which with the kubelet source is an error rather
	// than nothing to do.
	changeSignal, changeSignalSet bool
	// changeSignalRuntimeClasses are comma-separated RuntimeClass names whose pods' writes their
	// cgroup carries, beside the node's default runtime
	// (--collection.change-signal.runtime-classes; exporter.Config.ChangeSignalRuntimeClasses).
	changeSignalRuntimeClasses string
	cgroup                     podcgroup.Config
	calibration                calibrationConfig
	// autoRoot follows the root calibration finds, with --cgroup.root=auto (nil otherwise).
	autoRoot *rootFollower
	// openFiles counts toward walked emptyDirs the files their pods' processes deleted but
	// hold open (--collection.open-files), through a helper started before Landlock.
	openFiles bool
	// watchLogs measures the logs of a pod with a limit as soon as inotify sees them written
	// (--collection.watch-logs).
	watchLogs bool

	kubeletURL          string
	kubeletViaAPIServer bool
	kubeletCAFile       string
	kubeletTokenFile    string
	kubeletInsecure     bool
	kubeletTimeout      time.Duration

	// notify tells the remediator of each crossing of a limit (--remediator.url; empty: off).
	notify notify.Config
}

// defaultConfig is the one place of the command's defaults: the flags show and apply them.
func defaultConfig() config {
	return config{ //nolint:gosec // G101: kubeletTokenFile is a path to a token, not a credential
		telemetryPath:    "/metrics",
		denyWrites:       true,
		kube:             kubeclient.Config{QPS: rest.DefaultQPS, Burst: rest.DefaultBurst},
		source:           sourceFilesystem,
		exporter:         exporter.DefaultConfig(),
		fs:               source.DefaultFilesystem(),
		changeSignal:     true,
		watchLogs:        true,
		cgroup:           podcgroup.Config{Mount: podcgroup.DefaultConfig().Mount, Root: podcgroup.RootAuto, Driver: podcgroup.DefaultConfig().Driver},
		kubeletTokenFile: "/var/run/secrets/kubernetes.io/serviceaccount/token",
		kubeletTimeout:   10 * time.Second,
		notify:           notify.DefaultConfig(),
	}
}

// useOpenFiles: open files are counted and the source walks.
func (c *config) useOpenFiles() bool { return c.openFiles && c.source == sourceFilesystem }

// useLogWatch: logs are measured, by walking them.
func (c *config) useLogWatch() bool {
	return c.watchLogs && c.source == sourceFilesystem && c.exporter.MeasureEphemeralStorage
}

// useChangeSignal: the change signal is on and the source walks.
func (c *config) useChangeSignal() bool { return c.changeSignal && c.source == sourceFilesystem }

// newApp declares the flags, bound to cfg and defaulting to what cfg holds (defaultConfig).
func newApp(cfg *config) *kingpin.Application {
	def := func(v any) string { return fmt.Sprint(v) }
	ec, fsc := &cfg.exporter, &cfg.fs
	app := kingpin.New("emptydir-exporter",
		"Publishes the usage and sizeLimit of every emptyDir volume of the pods on one node.")
	app.Version(version.Print("emptydir-exporter"))
	app.HelpFlag.Short('h')
	cfg.web = kingpinflag.AddFlags(app, ":"+strconv.Itoa(liveapi.DefaultPort))
	cfg.maxConns = httpserver.AddMaxConnectionsFlag(app, maxConnections)
	promslogflag.AddFlags(app, &cfg.log)
	app.Flag("web.telemetry-path", "Path under which to expose metrics.").
		Default(cfg.telemetryPath).StringVar(&cfg.telemetryPath)
	app.Flag("metric-allowlist", "Comma-separated metric families (names or whole-name regular expressions) to expose, none else; excludes --metric-denylist. Keep the three *_over_limit_bytes families the remediation alerts need.").
		StringVar(&cfg.metricAllowlist)
	app.Flag("metric-denylist", "Comma-separated metric family names and/or regular expressions (each matching a whole name) not to expose on the telemetry path; excludes --metric-allowlist.").
		StringVar(&cfg.metricDenylist)
	app.Flag("metric-opt-in-list", "Comma-separated opt-in metric families (names or whole-name regular expressions) to publish, of "+strings.Join(exporter.OptInFamilies, ", ")+"; '.*' publishes them all.").
		StringVar(&cfg.metricOptInList)
	app.Flag("namespaces", "Comma-separated namespaces whose pods are measured; empty: every namespace. Pods of other namespaces are never evicted.").
		StringVar(&cfg.namespaces)
	app.Flag("namespaces-denylist", "Comma-separated namespaces whose pods are not measured (the API server leaves them out of the exporter's watch); applied after --namespaces.").
		StringVar(&cfg.namespacesDenylist)
	app.Flag("node.name", "Node whose pods to measure (required; set it from the downward API's spec.nodeName).").
		Envar("NODE_NAME").StringVar(&ec.NodeName)
	cfg.kube.AddFlags(app)
	app.Flag("collection.source", "Where usage comes from: filesystem (walk the kubelet's volume directories; fresh, works without the Summary API) or kubelet (Summary API; stale by --volume-stats-agg-period).").
		Default(cfg.source).StringVar(&cfg.source) // validate names the flag; kingpin's enum error does not
	app.Flag("collection.interval", "How often every volume with a sizeLimit is measured (source kubelet: every volume); at least 1s.").
		Default(def(ec.Interval)).DurationVar(&ec.Interval)
	app.Flag("collection.align-to-scrapes", "End each collection cycle just before a regular scraper's scrapes, shifting the cycle's phase, not its interval (docs/metrics.md#scrape-aligned-cycles).").
		Default(def(ec.AlignToScrapes)).BoolVar(&ec.AlignToScrapes)
	app.Flag("kubelet.root-dir", "The kubelet's --root-dir as mounted into the exporter (source filesystem).").
		Default(fsc.KubeletRootDir).StringVar(&fsc.KubeletRootDir)
	app.Flag("kubelet.pod-logs-dir", "The kubelet's podLogsDir as mounted into the exporter: the pods' and containers' log files, which count toward their ephemeral-storage limits (source filesystem, --collection.ephemeral-storage).").
		Default(fsc.PodLogsDir).StringVar(&fsc.PodLogsDir)
	app.Flag("collection.ephemeral-storage", "Also measure what the kubelet counts toward pods' ephemeral-storage limits beside emptyDirs, and publish the pods' and containers' usage and limits.").
		Default(def(ec.MeasureEphemeralStorage)).BoolVar(&ec.MeasureEphemeralStorage)
	app.Flag("containerd.task-dir", "containerd's runtime v2 task directory as mounted into the exporter with HostToContainer propagation, where the writable layers are found (--collection.ephemeral-storage).").
		Default(fsc.Layers.TaskDir).StringVar(&fsc.Layers.TaskDir)
	app.Flag("containerd.snapshotter-root", "The root of containerd's overlayfs snapshotter, mounted read-only at the node's path: the writable layers are walked there (--collection.ephemeral-storage).").
		Default(fsc.Layers.SnapshotterRoot).StringVar(&fsc.Layers.SnapshotterRoot)
	app.Flag("containerd.native-snapshotter-root", "The root of containerd's native snapshotter, mounted read-only, where such layers are walked whole; empty: they are reported unlocated (--collection.ephemeral-storage).").
		Default(fsc.Layers.NativeSnapshotterRoot).StringVar(&fsc.Layers.NativeSnapshotterRoot)
	app.Flag("containerd.cri-containers-dir", "The CRI plugin's container directory, mounted read-only, for image VOLUMEs no Kubernetes mount covers; empty: such layers are reported unlocated (--collection.ephemeral-storage).").
		Default(fsc.Layers.CRIContainersDir).StringVar(&fsc.Layers.CRIContainersDir)
	app.Flag("crio.storage-root", "CRI-O's containers/storage graph root, mounted read-only, where cri-o:// writable layers are walked; empty: they are reported unlocated (--collection.ephemeral-storage).").
		StringVar(&fsc.Layers.CRIOStorageRoot)
	app.Flag("docker.root", "dockerd's data-root, mounted read-only, where docker:// writable layers (cri-dockerd) are walked; empty: they are reported unlocated (--collection.ephemeral-storage).").
		StringVar(&fsc.Layers.DockerRoot)
	app.Flag("fs.deny-writes", "At start, take every right to write files from the process with Landlock (Linux 5.13+); without Landlock the exporter warns and runs on.").
		Default(def(cfg.denyWrites)).BoolVar(&cfg.denyWrites)
	app.Flag("fs.walk-concurrency", "Directories (or batches of a large directory's entries) read at once while walking one volume, 1 to 64 (source filesystem); measured in docs/performance.md.").
		Default(def(fsc.WalkConcurrency)).IntVar(&fsc.WalkConcurrency)
	app.Flag("fs.project-quota", "Read a volume's usage in O(1) from the project quota the kubelet set, instead of walking it; needs CAP_SYS_ADMIN (source filesystem).").
		Default(def(fsc.ProjectQuotas)).BoolVar(&fsc.ProjectQuotas)
	app.Flag("collection.concurrency", "Volumes walked at once by the collection, 1 to 16 (source filesystem); above 1, one slow volume cannot hold up the others.").
		Default(def(ec.VolumeConcurrency)).IntVar(&ec.VolumeConcurrency)
	app.Flag("collection.volume-timeout", "Time one volume's walk may take, at least 1s (source filesystem); it may exceed the interval, as cycles publish each volume's last completed walk meanwhile.").
		Default(def(ec.VolumeTimeout)).DurationVar(&ec.VolumeTimeout)
	app.Flag("collection.unlimited-interval", "How often to walk a volume without a sizeLimit, at least --collection.interval (source filesystem).").
		Default(def(ec.UnlimitedInterval)).DurationVar(&ec.UnlimitedInterval)
	app.Flag("collection.cpu-budget", "CPU the whole process may spend, live measurements aside (they have budgets of their own), as a share of one core, 0 to 1024; 0: no budget. Due walks beyond it are deferred (source filesystem).").
		Default(def(ec.CPUBudget)).Float64Var(&ec.CPUBudget)
	app.Flag("collection.change-signal", "Walk the parts whose pod's cgroup says it wrote nothing since their last walk after all others (docs/change-signal.md). Needs the node's cgroups at --cgroup.mount (source filesystem).").
		Default(def(cfg.changeSignal)).IsSetByUser(&cfg.changeSignalSet).BoolVar(&cfg.changeSignal)
	app.Flag("collection.change-signal.skip-unchanged", "With --collection.change-signal, skip the walks of unchanged parts until their last walk is --collection.unlimited-interval old, even within the budget.").
		Default(def(ec.SkipUnchanged)).BoolVar(&ec.SkipUnchanged)
	app.Flag("collection.change-signal.runtime-classes", "Comma-separated RuntimeClasses whose pods' writes their cgroup carries (runc-like: runc, crun, nvidia), beside the node's default runtime; other pods get no change mark.").
		StringVar(&cfg.changeSignalRuntimeClasses)
	app.Flag("collection.watch-logs", "Measure the logs of a pod with an ephemeral-storage limit as soon as inotify sees them written, not at the next cycle: its runtime writes them outside the pod's cgroup (source filesystem, --collection.ephemeral-storage).").
		Default(def(cfg.watchLogs)).BoolVar(&cfg.watchLogs)
	app.Flag("collection.open-files", "Count toward a walked emptyDir the files its pod deleted but holds open. Needs hostPID and CAP_SYS_PTRACE (docs/security.md; source filesystem).").
		Default(def(cfg.openFiles)).BoolVar(&cfg.openFiles)
	app.Flag("cgroup.mount", "The node's cgroup filesystem (/sys/fs/cgroup of the host, not the container's own) as mounted into the exporter, read-only (--collection.change-signal, --collection.open-files).").
		Default(cfg.cgroup.Mount).StringVar(&cfg.cgroup.Mount)
	app.Flag("cgroup.root", "The kubelet's --cgroup-root in cgroupfs form, or auto: found from the exporter's own pod, at start and at each calibration (--collection.change-signal, --collection.open-files).").
		Default(cfg.cgroup.Root).StringVar(&cfg.cgroup.Root)
	app.Flag("cgroup.driver", "The kubelet's --cgroup-driver: cgroupfs, systemd, or auto, whichever layout has the pod's cgroup (--collection.change-signal, --collection.open-files).").
		Default(string(cfg.cgroup.Driver)).StringVar((*string)(&cfg.cgroup.Driver))
	app.Flag("kubelet.url", "Base URL of the node's kubelet, e.g. https://$(NODE_IP):10250, for source kubelet or layers not located; http:// only with an empty --kubelet.token-file.").
		StringVar(&cfg.kubeletURL)
	app.Flag("kubelet.via-apiserver", "Reach the kubelet through the API server's node proxy instead of --kubelet.url (needs nodes/proxy get); with source filesystem, for the writable layers it cannot locate.").
		Default(def(cfg.kubeletViaAPIServer)).BoolVar(&cfg.kubeletViaAPIServer)
	app.Flag("kubelet.ca-file", "CA bundle that signed the kubelet's serving certificate; system roots when empty.").
		StringVar(&cfg.kubeletCAFile)
	app.Flag("kubelet.token-file", "Bearer token for the kubelet, re-read as it rotates; empty sends none, as an http:// --kubelet.url requires.").
		Default(cfg.kubeletTokenFile).StringVar(&cfg.kubeletTokenFile)
	app.Flag("kubelet.insecure-skip-tls-verify", "Do not verify the kubelet's serving certificate. Only for test clusters.").
		Default(def(cfg.kubeletInsecure)).BoolVar(&cfg.kubeletInsecure)
	app.Flag("kubelet.timeout", "Timeout of one Summary API request.").
		Default(def(cfg.kubeletTimeout)).DurationVar(&cfg.kubeletTimeout)
	app.Flag("live.concurrency", "Live measurements (for the remediator) running at once on the node; one caller gets up to this minus 1, the others queue.").
		Default(def(ec.LiveConcurrency)).IntVar(&ec.LiveConcurrency)
	app.Flag("live.max-wait", "How long a live request waits for a slot before it is refused (429 or 503, with Retry-After); below the 30s live timeout.").
		Default(def(ec.LiveMaxWait)).DurationVar(&ec.LiveMaxWait)
	app.Flag("remediator.url", "Base URL of the remediator to notify at once when a part of a pod crosses its limit (its Service, e.g. http://emptydir-remediator.emptydir-guard.svc:9732); empty: off, the alerts alone.").
		Default(cfg.notify.URL).StringVar(&cfg.notify.URL)
	app.Flag("remediator.token-file", "File with the ServiceAccount token for the remediator (audience "+noticeapi.Audience+"), re-read for every notice; required with --remediator.url.").
		Default(cfg.notify.TokenFile).StringVar(&cfg.notify.TokenFile)
	addCalibrationFlags(app, &cfg.calibration)
	return app
}

// validate checks the flags against each other without touching the system, so
// that every rule is a table test away. The exporter's own settings are checked by
// exporter.Config.Validate, the walk's with the filesystem source only.
func (c *config) validate() error {
	var errs []error
	if err := c.kube.Validate(); err != nil {
		errs = append(errs, err)
	}
	ec := c.exporter
	if c.source == sourceFilesystem {
		ec.Source = &c.fs
	}
	if err := ec.Validate(); err != nil {
		errs = append(errs, err)
	}
	if _, err := c.metricFilter(); err != nil {
		errs = append(errs, err)
	}
	for flag, list := range map[string]string{"--namespaces": c.namespaces, "--namespaces-denylist": c.namespacesDenylist} {
		for _, ns := range splitList(list) {
			if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
				errs = append(errs, fmt.Errorf("%s: %q is not a namespace name: %s", flag, ns, strings.Join(msgs, "; ")))
			}
		}
	}
	if c.changeSignal && c.changeSignalSet && c.source != sourceFilesystem {
		errs = append(errs, fmt.Errorf("--collection.change-signal needs --collection.source=%s: it orders walks", sourceFilesystem))
	}
	if c.exporter.SkipUnchanged && !c.useChangeSignal() {
		errs = append(errs, fmt.Errorf("--collection.change-signal.skip-unchanged needs --collection.change-signal and --collection.source=%s", sourceFilesystem))
	}
	if c.changeSignalRuntimeClasses != "" && !c.useChangeSignal() {
		errs = append(errs, fmt.Errorf("--collection.change-signal.runtime-classes needs --collection.change-signal and --collection.source=%s", sourceFilesystem))
	}
	for _, rc := range splitList(c.changeSignalRuntimeClasses) {
		if msgs := validation.IsDNS1123Subdomain(rc); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--collection.change-signal.runtime-classes: %q is not a RuntimeClass name: %s", rc, strings.Join(msgs, "; ")))
		}
	}
	if c.openFiles && c.source != sourceFilesystem {
		errs = append(errs, fmt.Errorf("--collection.open-files needs --collection.source=%s: it adds to the walks", sourceFilesystem))
	}
	if c.useChangeSignal() || c.useOpenFiles() {
		cg := c.cgroup
		if cg.Root == podcgroup.RootAuto {
			cg.Root = "/" // checked once calibration has found it
		}
		if err := cg.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("--cgroup.root/--cgroup.driver: %w", err))
		}
		if !filepath.IsAbs(c.cgroup.Mount) {
			errs = append(errs, fmt.Errorf("--cgroup.mount=%q must be an absolute path", c.cgroup.Mount))
		}
	}
	if c.notify.URL != "" {
		if _, err := notify.New(c.notify); err != nil {
			errs = append(errs, err)
		}
	}
	if len(c.telemetryPath) == 0 || c.telemetryPath[0] != '/' {
		errs = append(errs, fmt.Errorf("--web.telemetry-path=%q must start with /", c.telemetryPath))
	}
	switch c.source {
	case sourceFilesystem: // checked above, by source.Filesystem.Validate
		// The kubelet, if named, gives the writable layers that cannot be located.
		if c.kubeletURL != "" || c.kubeletViaAPIServer {
			errs = append(errs, c.validateKubelet()...)
		}
	case sourceKubelet:
		if !c.kubeletViaAPIServer && c.kubeletURL == "" {
			errs = append(errs, errors.New("--collection.source=kubelet needs --kubelet.url or --kubelet.via-apiserver"))
		}
		errs = append(errs, c.validateKubelet()...)
	default:
		errs = append(errs, fmt.Errorf("--collection.source=%q is neither %s nor %s", c.source, sourceFilesystem, sourceKubelet))
	}
	return errors.Join(errs...)
}

// metricFilter is the filter of --metric-allowlist, --metric-denylist and --metric-opt-in-list.
func (c *config) metricFilter() (*metricfilter.Filter, error) {
	f, err := metricfilter.New(splitList(c.metricAllowlist), splitList(c.metricDenylist))
	if err != nil {
		return nil, fmt.Errorf("--metric-allowlist/--metric-denylist: %w", err)
	}
	f, err = f.WithOptIn(exporter.OptInFamilies, splitList(c.metricOptInList))
	if err != nil {
		return nil, fmt.Errorf("--metric-opt-in-list: %w", err)
	}
	return f, nil
}

// splitList splits a comma-separated flag value; nil for an empty one.
func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// validateKubelet checks the flags of the kubelet's Summary API: the source kubelet's, or the
// filesystem source's fallback for writable layers it cannot locate.
func (c *config) validateKubelet() []error {
	var errs []error
	if c.kubeletTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--kubelet.timeout=%s must be positive", c.kubeletTimeout))
	}
	switch {
	case c.kubeletViaAPIServer && c.kubeletURL != "":
		errs = append(errs, errors.New("--kubelet.url and --kubelet.via-apiserver exclude each other"))
	case c.kubeletURL != "":
		u, err := url.Parse(c.kubeletURL)
		switch {
		case err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "":
			errs = append(errs, fmt.Errorf("--kubelet.url=%q is not an http(s) URL with a host", c.kubeletURL))
		case u.Scheme == "http" && c.kubeletTokenFile != "":
			// The token is a service account credential: over plain HTTP anyone on the
			// path reads it. Only a kubelet port without authentication may be plain.
			errs = append(errs, fmt.Errorf("--kubelet.url=%q is plain http but --kubelet.token-file is set: the bearer token would travel in clear text; use https:// or, for a kubelet port that needs no token, --kubelet.token-file=\"\"", c.kubeletURL))
		case u.Scheme == "http" && (c.kubeletInsecure || c.kubeletCAFile != ""):
			errs = append(errs, fmt.Errorf("--kubelet.url=%q is plain http: --kubelet.ca-file and --kubelet.insecure-skip-tls-verify apply only to https", c.kubeletURL))
		}
		if c.kubeletInsecure && c.kubeletCAFile != "" {
			errs = append(errs, errors.New("--kubelet.ca-file and --kubelet.insecure-skip-tls-verify exclude each other"))
		}
	}
	return errs
}

// checkPaths checks the files the flags name, once validate has passed.
func (c *config) checkPaths() error {
	var errs []error
	if c.source == sourceFilesystem {
		podsDir := filepath.Join(c.fs.KubeletRootDir, "pods")
		if fi, err := os.Stat(podsDir); err != nil {
			errs = append(errs, fmt.Errorf("--kubelet.root-dir: %w (mount the kubelet's root dir read-only into the exporter)", err))
		} else if !fi.IsDir() {
			errs = append(errs, fmt.Errorf("--kubelet.root-dir: %s is not a directory", podsDir))
		} else if f, err := os.Open(podsDir); err != nil {
			errs = append(errs, fmt.Errorf("--kubelet.root-dir: %w", err))
		} else {
			f.Close()
		}
	}
	if c.kubeletURL != "" {
		for flag, path := range map[string]string{"--kubelet.ca-file": c.kubeletCAFile, "--kubelet.token-file": c.kubeletTokenFile} {
			if path == "" {
				continue
			}
			if _, err := os.Stat(path); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", flag, err))
			}
		}
	}
	if c.kube.Kubeconfig != "" {
		if _, err := os.Stat(c.kube.Kubeconfig); err != nil {
			errs = append(errs, fmt.Errorf("--kubeconfig: %w", err))
		}
	}
	if *c.web.WebConfigFile != "" {
		if err := web.Validate(*c.web.WebConfigFile); err != nil {
			errs = append(errs, fmt.Errorf("--web.config.file: %w", err))
		}
	}
	return errors.Join(errs...)
}
