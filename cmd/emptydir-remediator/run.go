package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	promconfig "github.com/prometheus/common/config"
	"github.com/prometheus/common/promslog"
	"github.com/prometheus/common/version"
	"github.com/prometheus/exporter-toolkit/web"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/emptydir-guard/emptydir-guard/remediator"
)

const serviceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// run parses the flags, serves until SIGINT/SIGTERM and returns the exit code:
// 0 after a clean shutdown, 1 on a runtime error, 2 on bad flags.
func run() int {
	c, logCfg, webFlags, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintf(os.Stderr, "emptydir-remediator: %v; see --help\n", err)
		return 2
	}
	logger := promslog.New(logCfg)
	// client-go logs through klog: route it into the same structured logger.
	klog.SetSlogLogger(logger.With("component", "client-go"))
	fillDefaults(c)
	if err := validate(c); err != nil {
		logger.Error("invalid flags", "err", err)
		return 2
	}
	logger.Info("starting emptydir-remediator", "version", version.Info(), "build_context", version.BuildContext(),
		"dry_run", c.dryRun, "source", c.source, "leader_elect", c.leaderElect)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, c, webFlags, logger); err != nil {
		logger.Error("emptydir-remediator failed", "err", err)
		return 1
	}
	logger.Info("emptydir-remediator stopped")
	return 0
}

// fillDefaults fills namespaces and the identity left empty from the pod's environment.
func fillDefaults(c *config) {
	own := os.Getenv("POD_NAMESPACE")
	if own == "" {
		if b, err := os.ReadFile(serviceAccountNamespaceFile); err == nil {
			own = strings.TrimSpace(string(b))
		}
	}
	if c.exporterNS == "" {
		c.exporterNS = own
	}
	if c.leaseNamespace == "" {
		c.leaseNamespace = own
	}
	if c.leaseIdentity == "" {
		c.leaseIdentity = os.Getenv("POD_NAME")
	}
	if c.leaseIdentity == "" {
		c.leaseIdentity, _ = os.Hostname()
	}
}

func serve(ctx context.Context, c *config, webFlags *web.FlagConfig, logger *slog.Logger) error {
	rc, err := c.remediatorConfig()
	if err != nil {
		return err
	}
	// Read by the server, and again whenever the Secret behind it is rotated.
	rc.BearerTokenFile = c.bearerTokenFile
	restCfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		return fmt.Errorf("loading Kubernetes client configuration: %w", err)
	}
	restCfg.UserAgent = remediator.Component + "/" + version.Version
	restCfg.QPS, restCfg.Burst = c.kubeAPIQPS, c.kubeAPIBurst
	restCfg.Wrap(remediator.WithoutEvictionRetries)
	client, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return fmt.Errorf("creating Kubernetes client: %w", err)
	}
	measurer, err := newMeasurer(c, restCfg, client)
	if err != nil {
		return err
	}
	srv, err := remediator.New(rc, client, measurer, remediator.WithLogger(logger))
	if err != nil {
		return err
	}
	defer srv.Close()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	leDone := make(chan struct{})
	if c.leaderElect {
		go func() {
			defer close(leDone)
			if err := srv.RunLeaderElection(ctx, remediator.LeaderElectionConfig{
				Namespace: c.leaseNamespace, Name: c.leaseName, Identity: c.leaseIdentity,
				LeaseDuration: c.leaseDuration, RenewDeadline: c.renewDeadline, RetryPeriod: c.retryPeriod,
			}); err != nil {
				logger.Error("leader election failed", "err", err)
				cancel()
			}
		}()
	} else {
		close(leDone)
	}

	// The alerts of a payload are handled one after the other, each within
	// --web.alert-timeout (which holds the --measurement.timeout of its live walk).
	// WriteTimeout runs from the end of the request headers to the end of the answer, so it
	// must cover the whole payload: ten alerts at their slowest, plus 30 s for reading the
	// body (ReadTimeout) and writing the answer. A larger payload that is that slow loses its
	// answer (the connection is closed); Alertmanager then retries, and what was done is not
	// done twice (the ledger), so nothing is lost but time. With the documented grouping
	// (one pod volume per group, docs/alerting.md) a payload holds one alert.
	httpSrv := &http.Server{
		Handler:           srv.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      c.alertTimeout*10 + 30*time.Second,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelError),
	}
	errCh := make(chan error, 1)
	go func() { errCh <- web.ListenAndServe(httpSrv, webFlags, logger) }()

	var serveErr error
	select {
	case <-ctx.Done():
	case err := <-errCh:
		if !errors.Is(err, http.ErrServerClosed) {
			serveErr = fmt.Errorf("serving HTTP: %w", err)
		}
	}
	cancel()
	shutdownCtx, done := context.WithTimeout(context.Background(), c.alertTimeout+5*time.Second)
	defer done()
	if err := httpSrv.Shutdown(shutdownCtx); err != nil && serveErr == nil {
		serveErr = fmt.Errorf("shutting down HTTP server: %w", err)
	}
	<-leDone // releases the Lease (ReleaseOnCancel)
	return serveErr
}

// newMeasurer builds the configured live measurer.
func newMeasurer(c *config, restCfg *rest.Config, client kubernetes.Interface) (remediator.LiveMeasurer, error) {
	switch c.source {
	case remediator.SourceKubelet:
		if err := checkKubeletCredentials(restCfg); err != nil {
			return nil, err
		}
		hc, err := rest.HTTPClientFor(restCfg)
		if err != nil {
			return nil, fmt.Errorf("creating API server HTTP client: %w", err)
		}
		hc.Timeout = c.measureTimeout
		return remediator.NewKubeletMeasurer(hc, restCfg.Host, c.maxAge), nil
	default:
		hc := &http.Client{}
		if c.exporterHTTPCfg != "" {
			hcfg, _, err := promconfig.LoadHTTPConfigFile(c.exporterHTTPCfg)
			if err != nil {
				return nil, fmt.Errorf("loading --exporter.http-config.file: %w", err)
			}
			if err := checkExporterCredentials(c, *hcfg); err != nil {
				return nil, err
			}
			hc, err = promconfig.NewClientFromConfig(*hcfg, remediator.Component)
			if err != nil {
				return nil, fmt.Errorf("--exporter.http-config.file: %w", err)
			}
		}
		hc.Timeout = c.measureTimeout
		var loc remediator.ExporterLocator
		if c.exporterURL != "" {
			loc = remediator.StaticLocator(c.exporterURL)
		} else {
			loc = remediator.PodLocator{Client: client, Namespace: c.exporterNS, Selector: c.exporterSelector, Scheme: c.exporterScheme, Port: c.exporterPort}
		}
		return remediator.NewExporterMeasurer(hc, loc, c.maxAge), nil
	}
}
