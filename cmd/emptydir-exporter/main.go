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
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/promslog"
	"github.com/prometheus/common/version"
	"github.com/prometheus/exporter-toolkit/web"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/emptydir-guard/emptydir-guard/exporter"
	"github.com/emptydir-guard/emptydir-guard/internal/cliflag"
	"github.com/emptydir-guard/emptydir-guard/internal/httpserver"
	"github.com/emptydir-guard/emptydir-guard/internal/liveapi"
)

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int {
	cfg := defaultConfig()
	app := newApp(&cfg)
	if err := cliflag.Parse(app, args); err != nil {
		fmt.Fprintf(os.Stderr, "emptydir-exporter: %v\n", err)
		return 2
	}
	logger := promslog.New(&cfg.log)
	klog.SetSlogLogger(logger.With("component", "client-go"))
	cfg.renamed.Warn(logger)
	if err := cfg.validate(); err != nil {
		logger.Error("invalid flags", "err", err)
		return 2
	}
	if err := cfg.checkPaths(); err != nil {
		logger.Error("invalid flags", "err", err)
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, &cfg, logger); err != nil {
		logger.Error("exiting", "err", err)
		return 1
	}
	return 0
}

func serve(ctx context.Context, cfg *config, logger *slog.Logger) error {
	restConfig, err := cfg.kube.REST("emptydir-exporter/" + version.Version)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return fmt.Errorf("building Kubernetes client: %w", err)
	}

	source, err := newSource(cfg, client)
	if err != nil {
		return err
	}
	pods, err := exporter.NewPodWatcher(client, cfg.nodeName, 0)
	if err != nil {
		return err
	}
	exp, err := exporter.New(exporter.Config{
		NodeName: cfg.nodeName, Source: source, Pods: pods,
		Logger: logger, LiveConcurrency: cfg.liveConcurrency,
		VolumeConcurrency: cfg.volumeConcurrency, VolumeTimeout: cfg.volumeTimeout,
		UnlimitedInterval: cfg.unlimitedInterval, CPUBudget: cfg.cpuBudget,
		AlignToScrapes: cfg.align,
	})
	if err != nil {
		return err
	}
	pods.SetWatchErrorHandler(exp.WatchErrorHandler)

	reg := prometheus.NewRegistry()
	reg.MustRegister(exp,
		versioncollector.NewCollector("emptydir_exporter"),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	mux := http.NewServeMux()
	mux.Handle(cfg.telemetryPath, exp.ScrapeHandler(promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelError), ErrorHandling: promhttp.ContinueOnError,
	})))
	mux.Handle(liveapi.Pattern, exp.LiveHandler(exporter.LiveOptions{MaxWait: cfg.liveMaxWait}))
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
			Name: "emptyDir exporter", Description: "emptyDir volume usage and limits of node " + cfg.nodeName,
			Version: version.Info(),
			Links:   []web.LandingLinks{{Address: cfg.telemetryPath, Text: "Metrics"}},
		})
		if err != nil {
			return fmt.Errorf("building landing page: %w", err)
		}
		mux.Handle("/", landing)
	}

	server := newServer(mux, defaultServerTimeouts, logger)
	serveErr := make(chan error, 1)
	go func() { serveErr <- httpserver.ListenAndServe(server, cfg.web, *cfg.maxConns, logger) }()

	go func() {
		if err := pods.Start(ctx); err != nil && ctx.Err() == nil {
			logger.Error("pod informer", "err", err)
		}
	}()
	defer pods.Shutdown()
	logger.Info("starting", "version", version.Info(), "node", cfg.nodeName, "source", source.Name(),
		"interval", cfg.interval, "align_to_scrapes", cfg.align, "unlimited_interval", cfg.unlimitedInterval, "cpu_budget", cfg.cpuBudget)
	go exp.Run(ctx, cfg.interval)

	select {
	case err := <-serveErr:
		return fmt.Errorf("serving HTTP: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := server.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shutting down HTTP: %w", err)
	}
	return nil
}

func newSource(cfg *config, client kubernetes.Interface) (exporter.Source, error) {
	switch {
	case cfg.source == sourceFilesystem:
		return &exporter.FilesystemSource{KubeletRootDir: cfg.kubeletRootDir, WalkConcurrency: cfg.walkConcurrency,
			ProjectQuotas: cfg.projectQuota}, nil
	case cfg.kubeletViaAPIServer:
		return exporter.NewKubeletProxySource(client, cfg.nodeName), nil
	default:
		hc, err := exporter.NewKubeletHTTPClient(cfg.kubeletCAFile, cfg.kubeletTokenFile, cfg.kubeletInsecure, cfg.kubeletTimeout)
		if err != nil {
			return nil, err
		}
		return exporter.NewKubeletDirectSource(cfg.kubeletURL, hc), nil
	}
}
