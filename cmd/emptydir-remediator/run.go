package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
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

// leaderPortName is the container port through which a standby forwards webhooks to the
// leader's pod (the leader election identity is the pod name).
const leaderPortName = "http"

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
	opts := []remediator.Option{remediator.WithLogger(logger)}
	if c.ledgerConfigMap != "" && c.leaseNamespace != "" {
		opts = append(opts, remediator.WithLedgerConfigMap(c.leaseNamespace, c.ledgerConfigMap))
	} else {
		logger.Warn("eviction ledger in memory only: caps and cooldowns are forgotten on restart", "ledger_configmap", c.ledgerConfigMap)
	}
	if c.leaderElect {
		if webFlags.WebConfigFile != nil && *webFlags.WebConfigFile != "" {
			// The leader would be reached without the TLS and auth the web config sets up.
			logger.Warn("standbys answer webhooks with 503 instead of forwarding them to the leader: --web.config.file is set")
		} else {
			opts = append(opts, remediator.WithLeaderForwarding(
				remediator.PodLeaderResolver{Client: client, Namespace: c.leaseNamespace, PortName: leaderPortName},
				&http.Client{Transport: &http.Transport{
					DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
					MaxIdleConnsPerHost: 4,
					IdleConnTimeout:     90 * time.Second,
				}}))
		}
	}
	srv, err := remediator.New(rc, client, measurer, opts...)
	if err != nil {
		return err
	}
	defer srv.Close()

	var lead func(context.Context) error
	if c.leaderElect {
		lec := remediator.LeaderElectionConfig{
			Namespace: c.leaseNamespace, Name: c.leaseName, Identity: c.leaseIdentity,
			LeaseDuration: c.leaseDuration, RenewDeadline: c.renewDeadline, RetryPeriod: c.retryPeriod,
		}
		lead = func(ctx context.Context) error { return srv.RunLeaderElection(ctx, lec) }
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
	return serveUntilDone(ctx, httpSrv, func() error { return web.ListenAndServe(httpSrv, webFlags, logger) },
		lead, c.alertTimeout+5*time.Second)
}

// serveUntilDone serves HTTP (serve) and runs leader election (lead, when not nil) until ctx
// ends or either fails, then stops them in the order that keeps a single leader acting: the
// HTTP server drains first, so in-flight webhooks finish while this replica still holds the
// Lease, and only then does leader election stop, releasing the Lease (ReleaseOnCancel) for
// a standby to take at once. Releasing first would let the new leader act on the same alerts
// while the old one is still evicting.
func serveUntilDone(ctx context.Context, httpSrv *http.Server, serve func() error, lead func(context.Context) error, drainTimeout time.Duration) error {
	leCtx, stopLeading := context.WithCancel(context.WithoutCancel(ctx))
	defer stopLeading()
	leDone := make(chan error, 1)
	if lead != nil {
		go func() { leDone <- lead(leCtx) }()
	}
	serveDone := make(chan error, 1)
	go func() { serveDone <- serve() }()

	var runErr error
	leaderStopped := false
	select {
	case <-ctx.Done():
	case err := <-serveDone:
		if !errors.Is(err, http.ErrServerClosed) {
			runErr = fmt.Errorf("serving HTTP: %w", err)
		}
	case err := <-leDone:
		leaderStopped = true
		runErr = fmt.Errorf("leader election failed: %w", err)
	}
	drainCtx, done := context.WithTimeout(context.Background(), drainTimeout)
	defer done()
	if err := httpSrv.Shutdown(drainCtx); err != nil && runErr == nil {
		runErr = fmt.Errorf("shutting down HTTP server: %w", err)
	}
	stopLeading()
	if lead != nil && !leaderStopped {
		<-leDone //nolint:errcheck // stopLeading ended the election: its error is our own cancellation
	}
	return runErr
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
