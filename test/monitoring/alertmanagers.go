package monitoring

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/emptydir-guard/emptydir-guard/test/cluster"
)

// HAAlertmanagerOptions configures StartHAAlertmanagers: Alertmanagers clustered with each
// other over loopback inside the cluster's network namespace, as an HA pair (or more) runs.
type HAAlertmanagerOptions struct {
	// WebhookURLs has one URL per Alertmanager: where its receiver "emptydir-remediator"
	// posts (so that each instance may reach a different remediator replica).
	WebhookURLs []string
	// WebhookToken is written to a file used as the bearer credentials_file.
	WebhookToken string
	// AlertmanagerConfig is the configuration to derive from, as in Options.
	AlertmanagerConfig string
	// GroupWait, GroupInterval and RepeatInterval of the remediator route; default 1s, 5s, 10s.
	GroupWait, GroupInterval, RepeatInterval time.Duration
	// PeerTimeout is --cluster.peer-timeout: how long the instance at position i waits
	// (i × PeerTimeout) for the notification log of the ones before it before sending too.
	// 0 makes every instance send every notification: HA's duplicates, always.
	PeerTimeout time.Duration
	// BasePort: instance i listens on 127.0.0.1:BasePort+2i (web) and BasePort+2i+1 (cluster).
	BasePort int
	// Bin defaults to the Debian package's binary.
	Bin string
	// ReadyTimeout bounds the wait for every instance to be ready; default 1m.
	ReadyTimeout time.Duration
}

// HAAlertmanagers is a running Alertmanager cluster. Its processes are tracked by the
// cluster (StartProcess), so Cluster.Stop ends them; Stop ends them sooner.
type HAAlertmanagers struct {
	procs processes
	// Addrs are the instances' web addresses inside the namespace.
	Addrs   []string
	clients []alertmanagerClient
}

// StartHAAlertmanagers starts len(o.WebhookURLs) Alertmanagers, each peered with all the
// others, and waits until every one is ready and sees all its peers.
func StartHAAlertmanagers(ctx context.Context, c *cluster.Cluster, o HAAlertmanagerOptions) (*HAAlertmanagers, error) {
	if len(o.WebhookURLs) == 0 || o.BasePort == 0 {
		return nil, errors.New("alertmanagers: WebhookURLs and BasePort are required")
	}
	defaultRouteTimings(&o.GroupWait, &o.GroupInterval, &o.RepeatInterval)
	if o.Bin == "" {
		o.Bin = DefaultAlertmanagerBin
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = time.Minute
	}
	if _, err := os.Stat(o.Bin); err != nil {
		return nil, fmt.Errorf("%s: %w (install the Debian package prometheus-alertmanager: hack/install-deps.sh)", o.Bin, err)
	}
	dir, err := workDir(c, "alertmanagers-")
	if err != nil {
		return nil, err
	}
	tokenFile, err := writeToken(dir, o.WebhookToken)
	if err != nil {
		return nil, err
	}
	n := len(o.WebhookURLs)
	web := func(i int) string { return "127.0.0.1:" + strconv.Itoa(o.BasePort+2*i) }
	gossip := func(i int) string { return "127.0.0.1:" + strconv.Itoa(o.BasePort+2*i+1) }
	httpClient := c.HTTPClient(nil)
	h := &HAAlertmanagers{procs: processes{c: c}}
	for i, hook := range o.WebhookURLs {
		cfg, err := AlertmanagerConfig(o.Bin, o.AlertmanagerConfig, hook, tokenFile, o.GroupWait, o.GroupInterval, o.RepeatInterval)
		if err != nil {
			h.Stop()
			return nil, err
		}
		cfgFile := filepath.Join(dir, fmt.Sprintf("alertmanager-%d.yml", i))
		data := filepath.Join(dir, fmt.Sprintf("data-%d", i))
		if err := os.WriteFile(cfgFile, cfg, 0o644); err != nil {
			h.Stop()
			return nil, err
		}
		if err := os.MkdirAll(data, 0o755); err != nil {
			h.Stop()
			return nil, err
		}
		args := []string{"--config.file=" + cfgFile, "--storage.path=" + data,
			"--web.listen-address=" + web(i), "--web.external-url=http://" + web(i) + "/",
			"--cluster.listen-address=" + gossip(i), "--cluster.advertise-address=" + gossip(i),
			"--cluster.peer-timeout=" + o.PeerTimeout.String(), "--log.level=info"}
		for j := range n {
			if j != i {
				args = append(args, "--cluster.peer="+gossip(j))
			}
		}
		if err := h.procs.start(fmt.Sprintf("alertmanager-%d", i), o.Bin, args...); err != nil {
			h.Stop()
			return nil, err
		}
		h.Addrs = append(h.Addrs, web(i))
		h.clients = append(h.clients, alertmanagerClient{http: httpClient, base: "http://" + web(i)})
	}
	wctx, cancel := context.WithTimeout(ctx, o.ReadyTimeout)
	defer cancel()
	for i, am := range h.clients {
		name := fmt.Sprintf("alertmanager-%d", i)
		if err := waitReady(wctx, httpClient, am.base+"/-/ready"); err != nil {
			h.Stop()
			return nil, fmt.Errorf("%s not ready: %w\n%s", name, err, c.LogTail(name, 3000))
		}
		if err := waitPeers(wctx, am, n); err != nil {
			h.Stop()
			return nil, fmt.Errorf("%s: %w\n%s", name, err, c.LogTail(name, 3000))
		}
	}
	c.Logf("%d clustered alertmanagers at %v (inside %s)", n, h.Addrs, c.NetnsPath())
	return h, nil
}

// waitPeers waits until the instance reports a ready cluster of n peers.
func waitPeers(ctx context.Context, am alertmanagerClient, n int) error {
	var last string
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		st, err := am.status(ctx)
		if err == nil && st.Cluster.Status == "ready" && len(st.Cluster.Peers) == n {
			return true, nil
		}
		last = fmt.Sprintf("status %q, %d peers, %v", st.Cluster.Status, len(st.Cluster.Peers), err)
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("cluster of %d peers not formed: %w (last: %s)", n, err, last)
	}
	return nil
}

// PostAlerts sends alerts to every instance, as Prometheus does with each Alertmanager it
// is configured with, in batches of at most batch alerts.
func (h *HAAlertmanagers) PostAlerts(ctx context.Context, alerts []PostableAlert, batch int) error {
	for start := 0; start < len(alerts); start += batch {
		for i, am := range h.clients {
			if err := am.post(ctx, alerts[start:min(start+batch, len(alerts))]); err != nil {
				return fmt.Errorf("posting alerts to %s: %w", h.Addrs[i], err)
			}
		}
	}
	return nil
}

// Stop ends every instance (SIGTERM, then SIGKILL after 5s). Idempotent.
func (h *HAAlertmanagers) Stop() { h.procs.stop() }
