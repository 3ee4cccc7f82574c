package main

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/common/promslog"
	promslogflag "github.com/prometheus/common/promslog/flag"
	"github.com/prometheus/common/version"
	"github.com/prometheus/exporter-toolkit/web"
	"github.com/prometheus/exporter-toolkit/web/kingpinflag"
	"k8s.io/client-go/rest"

	"github.com/emptydir-guard/emptydir-guard/exporter"
	"github.com/emptydir-guard/emptydir-guard/internal/cliflag"
	"github.com/emptydir-guard/emptydir-guard/internal/httpserver"
	"github.com/emptydir-guard/emptydir-guard/internal/kubeclient"
	"github.com/emptydir-guard/emptydir-guard/internal/liveapi"
)

const (
	sourceFilesystem = "filesystem"
	sourceKubelet    = "kubelet"
)

// maxCPUBudget bounds --collection.cpu-budget: the walks cannot use more cores than
// --collection.concurrency × --fs.walk-concurrency allow, at most 16 × 64.
const maxCPUBudget = 1024

// config is everything the command line sets.
type config struct {
	web           *web.FlagConfig
	maxConns      *int // --web.max-connections
	log           promslog.Config
	renamed       cliflag.Renamed
	telemetryPath string

	nodeName string
	kube     kubeclient.Config
	source   string
	interval time.Duration
	align    bool

	kubeletRootDir    string
	walkConcurrency   int
	projectQuota      bool
	volumeConcurrency int
	volumeTimeout     time.Duration
	unlimitedInterval time.Duration
	cpuBudget         float64

	kubeletURL          string
	kubeletViaAPIServer bool
	kubeletCAFile       string
	kubeletTokenFile    string
	kubeletInsecure     bool
	kubeletTimeout      time.Duration

	liveConcurrency int
	liveMaxWait     time.Duration
}

// defaultConfig is the one place of the command's defaults: the flags show and apply them.
func defaultConfig() config {
	return config{ //nolint:gosec // G101: kubeletTokenFile is a path to a token, not a credential
		telemetryPath:     "/metrics",
		kube:              kubeclient.Config{QPS: rest.DefaultQPS, Burst: rest.DefaultBurst},
		source:            sourceFilesystem,
		interval:          10 * time.Second,
		align:             true,
		kubeletRootDir:    "/var/lib/kubelet",
		walkConcurrency:   4,
		projectQuota:      true,
		volumeConcurrency: 2,
		volumeTimeout:     time.Minute,
		unlimitedInterval: time.Minute,
		cpuBudget:         0.05,
		kubeletTokenFile:  "/var/run/secrets/kubernetes.io/serviceaccount/token",
		kubeletTimeout:    10 * time.Second,
		liveConcurrency:   2,
		liveMaxWait:       exporter.DefaultLiveMaxWait,
	}
}

// newApp declares the flags, bound to cfg and defaulting to what cfg holds (defaultConfig).
func newApp(cfg *config) *kingpin.Application {
	def := func(v any) string { return fmt.Sprint(v) }
	app := kingpin.New("emptydir-exporter",
		"Publishes the usage and sizeLimit of every emptyDir volume of the pods on one node.")
	app.Version(version.Print("emptydir-exporter"))
	app.HelpFlag.Short('h')
	cfg.web = kingpinflag.AddFlags(app, ":"+strconv.Itoa(liveapi.DefaultPort))
	cfg.maxConns = httpserver.AddMaxConnectionsFlag(app, maxConnections)
	promslogflag.AddFlags(app, &cfg.log)
	app.Flag("web.telemetry-path", "Path under which to expose metrics.").
		Default(cfg.telemetryPath).StringVar(&cfg.telemetryPath)
	app.Flag("node.name", "Node whose pods to measure (required; set it from the downward API's spec.nodeName).").
		Envar("NODE_NAME").StringVar(&cfg.nodeName)
	cfg.kube.AddFlags(app)
	app.Flag("collection.source", "Where usage comes from: filesystem (walk the kubelet's volume folders; fresh, works without the Summary API) or kubelet (Summary API; stale by --volume-stats-agg-period).").
		Default(cfg.source).StringVar(&cfg.source) // validate names the flag; kingpin's enum error does not
	app.Flag("collection.interval", "How often every volume with a sizeLimit is measured (source kubelet: every volume); at least 1s.").
		Default(def(cfg.interval)).DurationVar(&cfg.interval)
	app.Flag("collection.align-to-scrapes", "Shift the phase of the collection cycle (not its interval) so that a cycle ends just before the scrapes of a regular scraper, when the scrape interval is a multiple of --collection.interval or a divisor of it; else, or without one, the cycle keeps the phase of its start.").
		Default(def(cfg.align)).BoolVar(&cfg.align)
	app.Flag("kubelet.root-dir", "The kubelet's --root-dir as mounted into the exporter (source filesystem).").
		Default(cfg.kubeletRootDir).StringVar(&cfg.kubeletRootDir)
	app.Flag("fs.walk-concurrency", "Folders (or batches of a large folder's entries) read at once while walking one volume, 1 to 64 (source filesystem); measured in docs/performance.md.").
		Default(def(cfg.walkConcurrency)).IntVar(&cfg.walkConcurrency)
	app.Flag("fs.project-quota", "Read a volume's usage from the XFS/ext4 project quota the kubelet put it under (LocalStorageCapacityIsolationFSQuotaMonitoring), in O(1), instead of walking it; needs CAP_SYS_ADMIN, else every volume is walked (source filesystem).").
		Default(def(cfg.projectQuota)).BoolVar(&cfg.projectQuota)
	app.Flag("collection.concurrency", "Volumes walked at once by the collection, 1 to 16 (source filesystem); above 1, one slow volume cannot hold up the others.").
		Default(def(cfg.volumeConcurrency)).IntVar(&cfg.volumeConcurrency)
	app.Flag("collection.volume-timeout", "Time one volume's walk may take, at least 1s (source filesystem); it may exceed the interval, as cycles publish each volume's last completed walk meanwhile.").
		Default(def(cfg.volumeTimeout)).DurationVar(&cfg.volumeTimeout)
	app.Flag("collection.unlimited-interval", "How often to walk a volume without a sizeLimit, which cannot trigger an eviction, at least --collection.interval (source filesystem); volumes with one are walked every --collection.interval.").
		Default(def(cfg.unlimitedInterval)).DurationVar(&cfg.unlimitedInterval)
	app.Flag("collection.cpu-budget", "CPU the periodic walks may spend, as a share of one core, counted on the threads that walk (scrapes, live measurements and the Go runtime come on top); walks start within it, overdue ones and then those nearest to their sizeLimit first; due walks beyond it are deferred and counted (source filesystem). 0 to 1024; 0: no budget.").
		Default(def(cfg.cpuBudget)).Float64Var(&cfg.cpuBudget)
	app.Flag("kubelet.url", "Base URL of the node's kubelet, e.g. https://$(NODE_IP):10250 (source kubelet, unless --kubelet.via-apiserver); http:// only with an empty --kubelet.token-file, so a token never travels in clear text.").
		StringVar(&cfg.kubeletURL)
	app.Flag("kubelet.via-apiserver", "Reach the kubelet through the API server's node proxy instead of --kubelet.url (needs nodes/proxy get).").
		Default(def(cfg.kubeletViaAPIServer)).BoolVar(&cfg.kubeletViaAPIServer)
	app.Flag("kubelet.ca-file", "CA bundle that signed the kubelet's serving certificate; system roots when empty.").
		StringVar(&cfg.kubeletCAFile)
	app.Flag("kubelet.token-file", "Bearer token for the kubelet, re-read as it rotates; empty sends none, as an http:// --kubelet.url requires.").
		Default(cfg.kubeletTokenFile).StringVar(&cfg.kubeletTokenFile)
	app.Flag("kubelet.insecure-skip-tls-verify", "Do not verify the kubelet's serving certificate. Only for test clusters.").
		Default(def(cfg.kubeletInsecure)).BoolVar(&cfg.kubeletInsecure)
	app.Flag("kubelet.timeout", "Timeout of one Summary API request.").
		Default(def(cfg.kubeletTimeout)).DurationVar(&cfg.kubeletTimeout)
	app.Flag("live.concurrency", "Live measurements (for the remediator) running at once on the node; one caller (remote IP) runs one at a time, the others queue.").
		Default(def(cfg.liveConcurrency)).IntVar(&cfg.liveConcurrency)
	app.Flag("live.max-wait", "How long a live request waits for its caller's previous one and then for a free slot before it is refused (429 or 503, with Retry-After); below the live endpoint's 30s timeout.").
		Default(def(cfg.liveMaxWait)).DurationVar(&cfg.liveMaxWait)
	// The spellings before the flags were named area.name, kept for existing deployments.
	cfg.renamed.Alias(app, "node-name", "node.name")
	cfg.renamed.Alias(app, "source", "collection.source")
	return app
}

// validate checks the flags against each other without touching the system, so
// that every rule is a table test away.
func (c *config) validate() error {
	var errs []error
	if err := c.kube.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.nodeName == "" {
		errs = append(errs, errors.New("--node.name (or NODE_NAME) is required: the exporter measures the pods of one node"))
	}
	if c.interval < time.Second {
		errs = append(errs, fmt.Errorf("--collection.interval=%s is below 1s", c.interval))
	}
	if c.liveConcurrency < 1 {
		errs = append(errs, fmt.Errorf("--live.concurrency=%d must be at least 1", c.liveConcurrency))
	}
	if c.liveMaxWait <= 0 || c.liveMaxWait >= exporter.LiveTimeout {
		errs = append(errs, fmt.Errorf("--live.max-wait=%s must be positive and below the live endpoint's %s timeout, which it is part of", c.liveMaxWait, exporter.LiveTimeout))
	}
	if len(c.telemetryPath) == 0 || c.telemetryPath[0] != '/' {
		errs = append(errs, fmt.Errorf("--web.telemetry-path=%q must start with /", c.telemetryPath))
	}
	switch c.source {
	case sourceFilesystem:
		if c.walkConcurrency < 1 || c.walkConcurrency > 64 {
			errs = append(errs, fmt.Errorf("--fs.walk-concurrency=%d must be between 1 and 64", c.walkConcurrency))
		}
		if c.volumeConcurrency < 1 || c.volumeConcurrency > 16 {
			errs = append(errs, fmt.Errorf("--collection.concurrency=%d must be between 1 and 16", c.volumeConcurrency))
		}
		if c.volumeTimeout < time.Second {
			errs = append(errs, fmt.Errorf("--collection.volume-timeout=%s is below 1s", c.volumeTimeout))
		}
		if c.unlimitedInterval < c.interval {
			errs = append(errs, fmt.Errorf("--collection.unlimited-interval=%s is below --collection.interval=%s: volumes without a sizeLimit are walked at most as often as those with one", c.unlimitedInterval, c.interval))
		}
		// The negated form also refuses NaN.
		if !(c.cpuBudget >= 0 && c.cpuBudget <= maxCPUBudget) {
			errs = append(errs, fmt.Errorf("--collection.cpu-budget=%v must be between 0 (no budget) and %d (cores)", c.cpuBudget, maxCPUBudget))
		}
		if !filepath.IsAbs(c.kubeletRootDir) {
			errs = append(errs, fmt.Errorf("--kubelet.root-dir=%q must be an absolute path", c.kubeletRootDir))
		}
	case sourceKubelet:
		if c.kubeletTimeout <= 0 {
			errs = append(errs, fmt.Errorf("--kubelet.timeout=%s must be positive", c.kubeletTimeout))
		}
		switch {
		case c.kubeletViaAPIServer && c.kubeletURL != "":
			errs = append(errs, errors.New("--kubelet.url and --kubelet.via-apiserver exclude each other"))
		case !c.kubeletViaAPIServer && c.kubeletURL == "":
			errs = append(errs, errors.New("--collection.source=kubelet needs --kubelet.url or --kubelet.via-apiserver"))
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
	default:
		errs = append(errs, fmt.Errorf("--collection.source=%q is neither %s nor %s", c.source, sourceFilesystem, sourceKubelet))
	}
	return errors.Join(errs...)
}

// checkPaths checks the files the flags name, once validate has passed.
func (c *config) checkPaths() error {
	var errs []error
	if c.source == sourceFilesystem {
		podsDir := filepath.Join(c.kubeletRootDir, "pods")
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
	if c.source == sourceKubelet && c.kubeletURL != "" {
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
