// Command emptydir-exporter publishes the usage and sizeLimit of every emptyDir
// volume of the pods on its node, and serves live measurements to the remediator.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/promslog"
	"github.com/prometheus/common/version"
	"github.com/prometheus/exporter-toolkit/web"
	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/emptydir-guard/emptydir-guard/exporter"
	"github.com/emptydir-guard/emptydir-guard/exporter/calibrate"
	"github.com/emptydir-guard/emptydir-guard/exporter/change"
	"github.com/emptydir-guard/emptydir-guard/exporter/notify"
	"github.com/emptydir-guard/emptydir-guard/exporter/part"
	"github.com/emptydir-guard/emptydir-guard/exporter/source"
	"github.com/emptydir-guard/emptydir-guard/internal/cliflag"
	"github.com/emptydir-guard/emptydir-guard/internal/denywrites"
	"github.com/emptydir-guard/emptydir-guard/internal/httpserver"
	"github.com/emptydir-guard/emptydir-guard/internal/liveapi"
	"github.com/emptydir-guard/emptydir-guard/internal/logwatch"
	"github.com/emptydir-guard/emptydir-guard/internal/openfiles"
	"github.com/emptydir-guard/emptydir-guard/internal/podcgroup"
)

func main() {
	if code, helper := openFilesHelper(os.Args[1:]); helper {
		os.Exit(code)
	}
	os.Exit(run(os.Args[1:]))
}

// openFilesHelper serves as the helper --collection.open-files starts (openfiles.StartHelper)
// when args say so, and reports whether it did.
func openFilesHelper(args []string) (int, bool) {
	if len(args) != 1 || args[0] != openfiles.HelperArg {
		return 0, false
	}
	if err := openfiles.ServeHelper(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "emptydir-exporter open-files helper: %v\n", err)
		return 1, true
	}
	return 0, true
}

func run(args []string) int {
	cfg := defaultConfig()
	app := newApp(&cfg)
	if err := cliflag.Parse(app, args); err != nil {
		fmt.Fprintf(os.Stderr, "emptydir-exporter: %v\n", err)
		return 2
	}
	logger := promslog.New(&cfg.log)
	klog.SetSlogLogger(logger.With("component", "client-go"))
	if err := cfg.validate(); err != nil {
		logger.Error("invalid flags", "err", err)
		return 2
	}
	if err := cfg.checkPaths(); err != nil {
		logger.Error("invalid flags", "err", err)
		return 2
	}
	client, err := newClient(&cfg)
	if err != nil {
		logger.Error("exiting", "err", err)
		return 1
	}
	// Before the cgroups are opened: it decides --cgroup.root=auto.
	calibrator := newCalibrator(context.Background(), &cfg, client, logger)
	if cfg.useOpenFiles() {
		// Before Landlock: a restricted process may not read the descriptors of others.
		cfg.fs.OpenFiles = openFiles(&cfg, logger)
	}
	if cfg.denyWrites {
		// The exporter writes no file: what it reads through its mounts it must never change.
		if err := denywrites.Apply(); err != nil {
			logger.Warn("could not take the right to write files from the process; the exporter's mounts are as writable as the kernel makes them (docs/security.md)", "err", err)
		} else {
			logger.Info("filesystem writes denied to the process (Landlock)")
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, &cfg, client, calibrator, logger); err != nil {
		logger.Error("exiting", "err", err)
		return 1
	}
	return 0
}

// newClient is the exporter's client of the API server.
func newClient(cfg *config) (*kubernetes.Clientset, error) {
	restConfig, err := cfg.kube.REST("emptydir-exporter/" + version.Version)
	if err != nil {
		return nil, err
	}
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return nil, fmt.Errorf("building Kubernetes client: %w", err)
	}
	return client, nil
}

func serve(ctx context.Context, cfg *config, client kubernetes.Interface, calibrator *calibrate.Calibrator, logger *slog.Logger) error {
	src, err := newSource(cfg, client)
	if err != nil {
		return err
	}
	ec := cfg.exporter
	pods, err := exporter.NewPodWatcher(client, ec.NodeName, 0)
	if err != nil {
		return err
	}
	pods.SetNamespaces(splitList(cfg.namespaces), splitList(cfg.namespacesDenylist))
	if ec.MeasureEphemeralStorage {
		pods.SetEphemeralStorage(true)
		ec.DedicatedImageFilesystem = dedicatedImageFilesystem(ctx, cfg, src, logger)
	}
	if cfg.useChangeSignal() {
		ec.ChangeSignal = changeSignal(cfg, logger)
		ec.ChangeSignalRuntimeClasses = splitList(cfg.changeSignalRuntimeClasses)
	}
	filter, err := cfg.metricFilter()
	if err != nil {
		return err
	}
	ec.Source, ec.Pods, ec.Logger, ec.Publishes = src, pods, logger, filter.Exposes
	ownMetrics := []prometheus.Collector{versioncollector.NewCollector("emptydir_exporter"), calibrator}
	var notifier *notify.Notifier
	if cfg.notify.URL != "" {
		nc := cfg.notify
		nc.Node, nc.Logger = ec.NodeName, logger
		if notifier, err = notify.New(nc); err != nil {
			return err
		}
		ec.OverLimit, ec.CrossedLimit = notifier.Observe, notifier.Crossed
		ownMetrics = append(ownMetrics, notifier.Collectors()...)
	}
	background := []func(context.Context){}
	var exp *exporter.Exporter
	if cfg.useLogWatch() {
		lw, err := logwatch.New(logwatch.Config{Logger: logger, Written: func(p logwatch.Pod) { exp.MeasureLogsNow(ctx, p) }})
		if err != nil {
			logger.Warn("cannot watch the pods' log directories (inotify); their logs are walked at the cycle's pace", "err", err)
		} else {
			ec.LogWatch = lw
			background = append(background, lw.Run)
		}
	}
	exp, err = exporter.New(ec)
	if err != nil {
		return err
	}
	pods.SetWatchErrorHandler(exp.WatchErrorHandler)

	if hidden := slices.DeleteFunc(slices.Clone(exporter.TriggerFamilies), filter.Exposes); len(hidden) > 0 {
		logger.Warn("the metric allowlist or denylist hides families the shipped over-limit alerts need: no alert, so no remediation, fires on them", "families", hidden)
	}
	metrics, err := exp.MetricsHandler(exporter.MetricsHandlerOpts{
		Others: map[string][]prometheus.Collector{
			exporter.CollectorExporter: ownMetrics,
			"go":                       {collectors.NewGoCollector()},
			"process":                  {collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})},
		},
		Filter: filter.Gatherer,
		Handler: promhttp.HandlerOpts{
			ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelError), ErrorHandling: promhttp.ContinueOnError,
		},
	})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle(cfg.telemetryPath, metrics)
	mux.Handle(liveapi.Pattern, exp.LiveHandler())
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !pods.HasSynced() {
			http.Error(w, "pod informer not synced", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	if cfg.telemetryPath != "/" {
		landing, err := web.NewLandingPage(web.LandingConfig{
			Name: "emptyDir exporter", Description: "emptyDir volume usage and limits of node " + ec.NodeName,
			Version: version.Info(),
			Links:   []web.LandingLinks{{Address: cfg.telemetryPath, Text: "Metrics"}},
		})
		if err != nil {
			return fmt.Errorf("building landing page: %w", err)
		}
		mux.Handle("/", landing)
	}

	server := newServer(mux, defaultServerTimeouts, logger)
	logger.Info("starting", "version", version.Info(), "node", ec.NodeName, "source", src.Name(),
		"interval", ec.Interval, "ephemeral_storage", ec.MeasureEphemeralStorage, "dedicated_image_filesystem", ec.DedicatedImageFilesystem, "align_to_scrapes", ec.AlignToScrapes, "unlimited_interval", ec.UnlimitedInterval, "cpu_budget", ec.CPUBudget, "change_signal", cfg.changeSignal, "remediator_url", cfg.notify.URL)
	if notifier != nil {
		background = append(background, notifier.Run)
	}
	return runUntilDone(ctx, server, func() error { return httpserver.ListenAndServe(server, cfg.web, *cfg.maxConns, logger) }, pods, exp, calibrator, background...)
}

// dedicatedImageFilesystem judges whether the node's writable layers are on a filesystem of
// their own: from the devices of the directories the filesystem source reads, from one Summary for
// the kubelet source. When it cannot tell, it says so and takes them for the kubelet's (they
// count toward their containers' limits, as on most nodes).
func dedicatedImageFilesystem(ctx context.Context, cfg *config, src part.Source, logger *slog.Logger) bool {
	var dedicated bool
	var err error
	if ks, ok := src.(*source.Kubelet); ok {
		ctx, cancel := context.WithTimeout(ctx, cfg.kubeletTimeout)
		defer cancel()
		dedicated, err = ks.DedicatedImageFilesystem(ctx)
	} else {
		warnMissingPaths(cfg, logger)
		// The pods directory, not the root dir: a DaemonSet mounts only that one from the node.
		dedicated, err = source.DedicatedImageFilesystem(cfg.fs.Layers.ImageFilesystemDir(), filepath.Join(cfg.fs.KubeletRootDir, "pods"))
	}
	if err != nil {
		logger.Warn("cannot tell whether the image filesystem is dedicated; taking it for the kubelet's (writable layers count toward their containers' limits)", "err", err)
		return false
	}
	return dedicated
}

// changeSignal opens the pods' cgroups; a node where they cannot be read keeps today's
// schedule, which the warning and emptydir_exporter_change_marks_total{outcome="unavailable"} say.
func changeSignal(cfg *config, logger *slog.Logger) change.Signal {
	s, err := change.NewCgroup(cfg.cgroup, change.Dirs{
		Pods:         filepath.Join(cfg.fs.KubeletRootDir, "pods"),
		Layers:       cfg.fs.Layers.SnapshotterRoot,
		ImageVolumes: cfg.fs.Layers.CRIContainersDir,
	})
	if err != nil {
		logger.Warn("the change signal cannot read the node's cgroups; every part is walked at its cadence (mount the host's /sys/fs/cgroup read-only at --cgroup.mount)", "err", err)
		return change.Unavailable{Err: err}
	}
	cfg.autoRoot.follow(s)
	logger.Info("change signal on", append(s.Describe(), "runtime_classes", append([]string{"(default)"}, splitList(cfg.changeSignalRuntimeClasses)...))...)
	return s
}

// openFiles starts the helper that reads the pods' processes' descriptors and finds their
// processes in their cgroups; what fails makes every walked volume's outcome unreadable.
func openFiles(cfg *config, logger *slog.Logger) *source.OpenFiles {
	var warned sync.Once
	o := &source.OpenFiles{Proc: "/proc", OnError: func(p part.Pod, v part.Part, err error) {
		warned.Do(func() {
			logger.Warn("a pod's open files could not be read: the usage of its walked emptyDirs is a lower bound for files deleted but held open (the exporter needs hostPID and CAP_SYS_PTRACE); further failures are logged at debug level",
				"namespace", p.Namespace, "pod", p.Pod, "volume", v.Name, "err", err)
		})
		logger.Debug("a pod's open files could not be read", "namespace", p.Namespace, "pod", p.Pod, "volume", v.Name, "err", err)
	}}
	locator, lerr := podcgroup.Open(cfg.cgroup)
	if lerr == nil {
		cfg.autoRoot.follow(locator)
	}
	hostPID := openfiles.InInitialPIDNamespace()
	o.Procs = func(p part.Pod) ([]int, error) {
		if lerr != nil {
			return nil, lerr
		}
		pod, err := locator.Locate(p.KubeletUID(), p.QOSClass)
		if err != nil {
			return nil, err
		}
		pids, err := pod.Procs()
		// A running pod has a process (its sandbox's, at least): cgroup v1 leaves out those of
		// other PID namespaces rather than listing them as 0.
		if err == nil && len(pids) == 0 && !hostPID {
			return nil, podcgroup.ErrProcsHidden
		}
		return pids, err
	}
	helper, herr := openfiles.StartHelper()
	o.Count = func(ctx context.Context, proc string, pids []int, t openfiles.Target) (openfiles.Usage, error) {
		if herr != nil {
			return openfiles.Usage{}, herr
		}
		return helper.Count(ctx, proc, pids, t)
	}
	if lerr != nil || herr != nil {
		logger.Warn("cannot count the files pods deleted but hold open (--collection.open-files): walked emptyDirs' usage is a lower bound for them", "cgroups_err", lerr, "helper_err", herr)
	} else {
		logger.Info("counting the files pods deleted but hold open (--collection.open-files)", "cgroup_version", locator.Version(), "initial_pid_namespace", hostPID)
	}
	return o
}

// warnMissingPaths says which directory the ephemeral-storage measurement needs is not there. No
// reason to refuse to start: emptyDir volumes are measured all the same, and a pod whose logs
// cannot be read counts a not_found error, which fails the collection and its alert.
func warnMissingPaths(cfg *config, logger *slog.Logger) {
	for flag, dir := range map[string]string{"--kubelet.pod-logs-dir": cfg.fs.PodLogsDir,
		"--containerd.task-dir": cfg.fs.Layers.TaskDir, "--containerd.snapshotter-root": cfg.fs.Layers.SnapshotterRoot,
		"--containerd.native-snapshotter-root": cfg.fs.Layers.NativeSnapshotterRoot, "--containerd.cri-containers-dir": cfg.fs.Layers.CRIContainersDir,
		"--crio.storage-root": cfg.fs.Layers.CRIOStorageRoot, "--docker.root": cfg.fs.Layers.DockerRoot} {
		if dir == "" {
			continue // not asked for
		}
		if _, err := os.Stat(dir); err != nil {
			logger.Warn("a directory the pods' ephemeral-storage measurement reads is missing: mount it read-only into the exporter, or turn --collection.ephemeral-storage off",
				"flag", flag, "err", err)
		}
	}
}

// runUntilDone serves HTTP (serve), runs the pod informer and the collection until ctx ends or
// one of them fails, then stops them all and returns once each has: the HTTP server drains
// its requests (live walks included), Run waits for its walks, and the informer's goroutines
// end; calibration of the node's layout repeats meanwhile, and each of background runs (the
// notifier, the log watch).
func runUntilDone(ctx context.Context, server *http.Server, serve func() error, pods *exporter.PodWatcher, exp *exporter.Exporter, calibrator *calibrate.Calibrator, background ...func(context.Context)) error {
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		if err := serve(); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serving HTTP: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		<-ctx.Done()
		// Not derived from ctx, which has ended: the drain needs time of its own.
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := server.Shutdown(shutdownCtx); err != nil {
			return fmt.Errorf("shutting down HTTP: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		defer pods.Shutdown()
		if err := pods.Start(ctx); err != nil && ctx.Err() == nil {
			return fmt.Errorf("pod informer: %w", err)
		}
		<-ctx.Done()
		return nil
	})
	g.Go(func() error {
		exp.Run(ctx)
		return nil
	})
	g.Go(func() error {
		calibrator.Run(ctx, calibrate.Interval)
		return nil
	})
	for _, run := range background {
		g.Go(func() error {
			run(ctx)
			return nil
		})
	}
	return g.Wait()
}

func newSource(cfg *config, client kubernetes.Interface) (part.Source, error) {
	if cfg.source == sourceFilesystem {
		// The kubelet, when named, gives the writable layers the walk cannot locate.
		if cfg.kubeletURL != "" || cfg.kubeletViaAPIServer {
			fallback, err := newKubeletSource(cfg, client)
			if err != nil {
				return nil, err
			}
			cfg.fs.LayerFallback = fallback
		}
		return &cfg.fs, nil
	}
	return newKubeletSource(cfg, client)
}

// newKubeletSource reads the kubelet's Summary API as the --kubelet.* flags say.
func newKubeletSource(cfg *config, client kubernetes.Interface) (*source.Kubelet, error) {
	if cfg.kubeletViaAPIServer {
		return source.NewKubeletProxy(client, cfg.exporter.NodeName), nil
	}
	hc, err := source.NewKubeletHTTPClient(cfg.kubeletCAFile, cfg.kubeletTokenFile, cfg.kubeletInsecure, cfg.kubeletTimeout)
	if err != nil {
		return nil, err
	}
	return source.NewKubeletDirect(cfg.kubeletURL, hc), nil
}
