package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// HAAlertmanagerOptions configures StartHAAlertmanagers: Alertmanagers clustered with each
// other over loopback inside the cluster's network namespace, as an HA pair (or more) runs.
type HAAlertmanagerOptions struct {
	// WebhookURLs has one URL per Alertmanager: where its receiver "emptydir-remediator"
	// posts (so that each instance may reach a different remediator replica).
	WebhookURLs []string
	// WebhookToken is written to a file used as the bearer credentials_file.
	WebhookToken string
	// AlertmanagerConfig is the configuration to derive from, as in MonitoringOptions.
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
	procs *Monitoring // the processes, and readiness waits
	// Addrs are the instances' web addresses inside the namespace.
	Addrs []string
}

// StartHAAlertmanagers starts len(o.WebhookURLs) Alertmanagers, each peered with all the
// others, and waits until every one is ready and sees all its peers.
func (c *Cluster) StartHAAlertmanagers(ctx context.Context, o HAAlertmanagerOptions) (*HAAlertmanagers, error) {
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
	if err := os.MkdirAll(c.workDir, 0o755); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(c.workDir, "alertmanagers-")
	if err != nil {
		return nil, err
	}
	tokenFile := filepath.Join(dir, "webhook-token")
	if err := os.WriteFile(tokenFile, []byte(o.WebhookToken), 0o600); err != nil {
		return nil, err
	}
	n := len(o.WebhookURLs)
	web := func(i int) string { return "127.0.0.1:" + strconv.Itoa(o.BasePort+2*i) }
	gossip := func(i int) string { return "127.0.0.1:" + strconv.Itoa(o.BasePort+2*i+1) }
	h := &HAAlertmanagers{procs: &Monitoring{c: c, client: c.HTTPClient(nil)}}
	for i, hook := range o.WebhookURLs {
		cfg, err := AlertmanagerConfig(o.AlertmanagerConfig, hook, tokenFile, o.GroupWait, o.GroupInterval, o.RepeatInterval)
		if err != nil {
			return nil, err
		}
		cfgFile := filepath.Join(dir, fmt.Sprintf("alertmanager-%d.yml", i))
		data := filepath.Join(dir, fmt.Sprintf("data-%d", i))
		if err := os.WriteFile(cfgFile, cfg, 0o644); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(data, 0o755); err != nil {
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
		cmd := c.Command(context.Background(), o.Bin, args...)
		if err := c.StartProcess(fmt.Sprintf("alertmanager-%d", i), cmd); err != nil {
			h.Stop()
			return nil, err
		}
		h.procs.procs = append(h.procs.procs, cmd)
		h.Addrs = append(h.Addrs, web(i))
	}
	wctx, cancel := context.WithTimeout(ctx, o.ReadyTimeout)
	defer cancel()
	for i, addr := range h.Addrs {
		if err := h.procs.waitReady(wctx, "http://"+addr+"/-/ready"); err != nil {
			h.Stop()
			return nil, fmt.Errorf("alertmanager-%d not ready: %w\n%s", i, err, tailFile(c.LogPath(fmt.Sprintf("alertmanager-%d", i)), 3000))
		}
		if err := h.waitPeers(wctx, addr, n); err != nil {
			h.Stop()
			return nil, fmt.Errorf("alertmanager-%d: %w\n%s", i, err, tailFile(c.LogPath(fmt.Sprintf("alertmanager-%d", i)), 3000))
		}
	}
	c.logf("%d clustered alertmanagers at %v (inside %s)", n, h.Addrs, c.netnsPath)
	return h, nil
}

// waitPeers waits until the instance at addr reports a ready cluster of n peers.
func (h *HAAlertmanagers) waitPeers(ctx context.Context, addr string, n int) error {
	var last string
	for {
		var st struct {
			Cluster struct {
				Status string `json:"status"`
				Peers  []any  `json:"peers"`
			} `json:"cluster"`
		}
		err := h.procs.getJSON(ctx, "http://"+addr+"/api/v2/status", &st)
		if err == nil && st.Cluster.Status == "ready" && len(st.Cluster.Peers) == n {
			return nil
		}
		last = fmt.Sprintf("status %q, %d peers, %v", st.Cluster.Status, len(st.Cluster.Peers), err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster of %d peers not formed: %w (last: %s)", n, ctx.Err(), last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// PostableAlert is an alert as Prometheus posts it to /api/v2/alerts.
type PostableAlert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations,omitempty"`
	StartsAt    time.Time         `json:"startsAt"`
	EndsAt      time.Time         `json:"endsAt,omitzero"`
}

// PostAlerts sends alerts to every instance, as Prometheus does with each Alertmanager it
// is configured with, in batches of at most batch alerts.
func (h *HAAlertmanagers) PostAlerts(ctx context.Context, alerts []PostableAlert, batch int) error {
	for start := 0; start < len(alerts); start += batch {
		body, err := json.Marshal(alerts[start:min(start+batch, len(alerts))])
		if err != nil {
			return err
		}
		for _, addr := range h.Addrs {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/api/v2/alerts", bytes.NewReader(body))
			if err != nil {
				return err
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := h.procs.client.Do(req)
			if err != nil {
				return fmt.Errorf("posting alerts to %s: %w", addr, err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("posting alerts to %s: %s: %s", addr, resp.Status, b)
			}
		}
	}
	return nil
}

// Stop ends every instance (SIGTERM, then SIGKILL after 5s). Idempotent.
func (h *HAAlertmanagers) Stop() { h.procs.Stop() }
