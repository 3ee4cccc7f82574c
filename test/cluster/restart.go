package cluster

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Faults for tests: components stopped and started again while the rest of the cluster
// runs. etcd keeps the cluster's state throughout, so a restarted API server serves the same
// objects and resource versions, as after a control-plane upgrade or crash.

// ErrRunning is returned by StartAPIServer and StartKubelet while the component still runs.
var ErrRunning = errors.New("component is still running")

// StopAPIServer stops kube-apiserver (SIGTERM, then SIGKILL after 2s) and waits until it
// has exited. etcd, containerd, the kubelet and the pods keep running.
func (c *Cluster) StopAPIServer() {
	c.mu.Lock()
	p := c.apiserver
	c.mu.Unlock()
	p.stop(2 * time.Second)
	c.logf("kube-apiserver stopped")
}

// StartAPIServer starts kube-apiserver again with the flags Start gave it and waits for its
// /readyz. It is an error while the API server still runs.
func (c *Cluster) StartAPIServer(ctx context.Context) error {
	c.mu.Lock()
	p := c.apiserver
	c.mu.Unlock()
	if p != nil && !p.exited() {
		return fmt.Errorf("kube-apiserver: %w: StopAPIServer first", ErrRunning)
	}
	if err := c.startAPIServer(); err != nil {
		return err
	}
	if err := c.waitAPIServer(ctx); err != nil {
		return fmt.Errorf("restarted kube-apiserver: %w", err)
	}
	c.logf("kube-apiserver ready again")
	return nil
}

// StopKubelet stops the kubelet (SIGTERM, then SIGKILL after 2s). Containers keep running
// under containerd, and their volumes stay on disk, as when a node's kubelet restarts.
func (c *Cluster) StopKubelet() {
	c.mu.Lock()
	p := c.kubelet
	c.mu.Unlock()
	p.stop(2 * time.Second)
	c.logf("kubelet stopped")
}

// StartKubelet starts the kubelet again with the configuration Start gave it and waits until
// it answers its health check. (The node's Ready condition is no signal here: it still says
// Ready from before the stop.)
func (c *Cluster) StartKubelet(ctx context.Context) error {
	c.mu.Lock()
	p := c.kubelet
	c.mu.Unlock()
	if p != nil && !p.exited() {
		return fmt.Errorf("kubelet: %w: StopKubelet first", ErrRunning)
	}
	if err := c.startKubelet(); err != nil {
		return err
	}
	c.mu.Lock()
	p = c.kubelet
	c.mu.Unlock()
	hc := c.HTTPClient(nil)
	hc.Timeout = 2 * time.Second
	err := c.poll(ctx, "kubelet /healthz", p, func() (bool, error) {
		resp, err := hc.Get("http://127.0.0.1:10248/healthz")
		if err != nil {
			return false, nil
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusOK && strings.TrimSpace(string(b)) == "ok", nil
	})
	if err != nil {
		return fmt.Errorf("restarted kubelet: %w", err)
	}
	c.logf("kubelet healthy again")
	return nil
}

// DeletePodInEtcd removes a pod's object from etcd directly, behind the API server's back:
// the one way to change the cluster while the API server is down (StopAPIServer), so that
// watchers must notice on their own, once it is back, that the pod is gone. It returns an
// error unless exactly one object was deleted.
func (c *Cluster) DeletePodInEtcd(ctx context.Context, namespace, name string) error {
	key := "/registry/pods/" + namespace + "/" + name
	// etcd's JSON gateway of its v3 API; keys are base64 in it.
	body, _ := json.Marshal(map[string]string{"key": base64.StdEncoding.EncodeToString([]byte(key))})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, etcdClientURL+"/v3/kv/deleterange", strings.NewReader(string(body)))
	if err != nil {
		return err
	}
	resp, err := c.HTTPClient(nil).Do(req)
	if err != nil {
		return fmt.Errorf("etcd delete %s: %w", key, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("etcd delete %s: %s: %s", key, resp.Status, raw)
	}
	var out struct {
		Deleted string `json:"deleted"` // an int64, which the gateway writes as a string
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return fmt.Errorf("etcd delete %s: answer %s: %w", key, raw, err)
	}
	if out.Deleted != "1" {
		return fmt.Errorf("etcd delete %s: %q objects deleted, want 1 (answer %s)", key, out.Deleted, raw)
	}
	return nil
}
