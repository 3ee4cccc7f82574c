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
	"syscall"
	"time"

	promconfig "github.com/prometheus/common/config"
	"github.com/prometheus/common/promslog"
	"github.com/prometheus/common/version"
	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/emptydir-guard/emptydir-guard/internal/cliflag"
	"github.com/emptydir-guard/emptydir-guard/internal/httpserver"
	"github.com/emptydir-guard/emptydir-guard/remediator"
)

// leaderPortName is the container port through which a standby forwards webhooks to the
// leader's pod (the leader election identity is the pod name).
const leaderPortName = "http"

// run parses args, serves until SIGINT/SIGTERM and returns the exit code:
// 0 after a clean shutdown, 1 on a runtime error, 2 on bad flags.
func run(args []string) int {
	c := defaultConfig()
	app := newApp(&c)
	if err := cliflag.Parse(app, args); err != nil {
		fmt.Fprintf(os.Stderr, "emptydir-remediator: %v; see --help\n", err)
		return 2
	}
	logger := promslog.New(&c.log)
	// client-go logs through klog: route it into the same structured logger.
	klog.SetSlogLogger(logger.With("component", "client-go"))
	fillDefaults(&c)
	if err := validate(&c); err != nil {
		logger.Error("invalid flags", "err", err)
		return 2
	}
	logger.Info("starting emptydir-remediator", "version", version.Info(), "build_context", version.BuildContext(),
		"dry_run", c.remediator.DryRun, "source", c.measurement.source, "leader_elect", c.remediator.LeaderElection)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, &c, logger); err != nil {
		logger.Error("emptydir-remediator failed", "err", err)
		return 1
	}
	logger.Info("emptydir-remediator stopped")
	return 0
}

func serve(ctx context.Context, c *config, logger *slog.Logger) error {
	if err := checkWebhookToken(c.remediator.BearerTokenFile); err != nil {
		return err
	}
	restCfg, err := c.kube.REST(remediator.Component + "/" + version.Version)
	if err != nil {
		return err
	}
	restCfg.Wrap(remediator.WithoutEvictionRetries)
	client, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return fmt.Errorf("creating Kubernetes client: %w", err)
	}
	measurer, err := newMeasurer(c.measurement, restCfg, client)
	if err != nil {
		return err
	}
	lec := c.leaderElection
	opts := []remediator.Option{remediator.WithLogger(logger)}
	if c.ledgerConfigMap != "" && lec.Namespace != "" {
		opts = append(opts, remediator.WithLedgerConfigMap(lec.Namespace, c.ledgerConfigMap))
	} else {
		logger.Warn("eviction ledger in memory only: caps and cooldowns are forgotten on restart", "ledger_configmap", c.ledgerConfigMap)
	}
	if c.remediator.LeaderElection {
		if c.web.WebConfigFile != nil && *c.web.WebConfigFile != "" {
			// The leader would be reached without the TLS and auth the web config sets up.
			logger.Warn("standbys answer webhooks with 503 instead of forwarding them to the leader: --web.config.file is set")
		} else {
			opts = append(opts, remediator.WithLeaderForwarding(
				remediator.PodLeaderResolver{Client: client, Namespace: lec.Namespace, PortName: leaderPortName},
				&http.Client{Transport: &http.Transport{
					DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
					MaxIdleConnsPerHost: 4,
					IdleConnTimeout:     90 * time.Second,
				}}))
		}
	}
	srv, err := remediator.New(c.remediator, client, measurer, opts...)
	if err != nil {
		return err
	}
	defer srv.Close()

	var lead func(context.Context) error
	if c.remediator.LeaderElection {
		lead = func(ctx context.Context) error { return srv.RunLeaderElection(ctx, lec) }
	}

	httpSrv := newHTTPServer(srv.Handler(), defaultServerTimeouts(c.remediator.AlertTimeout), logger)
	return serveUntilDone(ctx, httpSrv, func() error { return httpserver.ListenAndServe(httpSrv, c.web, *c.maxConnections, logger) },
		lead, drainTimeout(c.remediator.AlertTimeout))
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
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		if err := serve(); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("serving HTTP: %w", err)
		}
		return nil
	})
	if lead != nil {
		g.Go(func() error {
			if err := lead(leCtx); leCtx.Err() == nil {
				return fmt.Errorf("leader election failed: %w", err)
			}
			return nil // stopLeading ended the election: its error is our own cancellation
		})
	}
	// The stop, in order: drain, then give up the Lease.
	g.Go(func() error {
		<-gctx.Done()
		drainCtx, done := context.WithTimeout(context.Background(), drainTimeout)
		defer done()
		err := httpSrv.Shutdown(drainCtx)
		stopLeading()
		if err != nil {
			return fmt.Errorf("shutting down HTTP server: %w", err)
		}
		return nil
	})
	return g.Wait()
}

// newMeasurer builds the configured live measurer.
func newMeasurer(m measurementConfig, restCfg *rest.Config, client kubernetes.Interface) (remediator.LiveMeasurer, error) {
	switch m.source {
	case remediator.SourceKubelet:
		if err := checkKubeletCredentials(restCfg); err != nil {
			return nil, err
		}
		kc := rest.CopyConfig(restCfg)
		kc.Timeout = m.timeout
		kubeletClient, err := kubernetes.NewForConfig(kc)
		if err != nil {
			return nil, fmt.Errorf("creating API server client for the kubelet Summary: %w", err)
		}
		return remediator.NewKubeletMeasurer(kubeletClient), nil
	default:
		hc := &http.Client{}
		if m.exporterHTTPConfig != "" {
			hcfg, _, err := promconfig.LoadHTTPConfigFile(m.exporterHTTPConfig)
			if err != nil {
				return nil, fmt.Errorf("loading --exporter.http-config.file: %w", err)
			}
			if err := checkExporterCredentials(m, *hcfg); err != nil {
				return nil, err
			}
			hc, err = promconfig.NewClientFromConfig(*hcfg, remediator.Component)
			if err != nil {
				return nil, fmt.Errorf("--exporter.http-config.file: %w", err)
			}
		}
		hc.Timeout = m.timeout
		var loc remediator.ExporterLocator
		if m.exporterURL != "" {
			loc = remediator.StaticLocator(m.exporterURL)
		} else {
			loc = remediator.PodLocator{Client: client, Namespace: m.exporterNamespace, Selector: m.exporterSelector, Scheme: m.exporterScheme, Port: m.exporterPort}
		}
		return remediator.NewExporterMeasurer(hc, loc), nil
	}
}
