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

// component is one process that the fault helpers stop and start again.
type component struct {
	name  string
	proc  func(*Cluster) *proc                  // the current process (under c.mu)
	start func(*Cluster) error                  // starts it again with the flags Start gave it
	ready func(*Cluster, context.Context) error // waits until it serves again
}

var (
	apiServerComponent = component{name: "kube-apiserver", proc: func(c *Cluster) *proc { return c.apiserver },
		start: (*Cluster).startAPIServer, ready: (*Cluster).waitAPIServer}
	kubeletComponent = component{name: "kubelet", proc: func(c *Cluster) *proc { return c.kubelet },
		start: (*Cluster).startKubelet, ready: (*Cluster).waitKubeletHealthy}
)

// StopAPIServer stops kube-apiserver (SIGTERM, then SIGKILL after 2s) and waits until it
// has exited. etcd, containerd, the kubelet and the pods keep running.
func (c *Cluster) StopAPIServer() { c.stopComponent(apiServerComponent) }

// StartAPIServer starts kube-apiserver again with the flags Start gave it and waits for its
// /readyz. It is an error while the API server still runs.
func (c *Cluster) StartAPIServer(ctx context.Context) error {
	return c.startComponent(ctx, apiServerComponent)
}

// StopKubelet stops the kubelet (SIGTERM, then SIGKILL after 2s). Containers keep running
// under containerd, and their volumes stay on disk, as when a node's kubelet restarts.
func (c *Cluster) StopKubelet() { c.stopComponent(kubeletComponent) }

// StartKubelet starts the kubelet again with the configuration Start gave it and waits until
// it answers its health check. (The node's Ready condition is no signal here: it still says
// Ready from before the stop.) It is an error while the kubelet still runs.
func (c *Cluster) StartKubelet(ctx context.Context) error {
	return c.startComponent(ctx, kubeletComponent)
}

func (c *Cluster) current(comp component) *proc {
	c.mu.Lock()
	defer c.mu.Unlock()
	return comp.proc(c)
}

func (c *Cluster) stopComponent(comp component) {
	c.current(comp).stop(2 * time.Second)
	c.logf("%s stopped", comp.name)
}

func (c *Cluster) startComponent(ctx context.Context, comp component) error {
	if p := c.current(comp); p != nil && !p.exited() {
		return fmt.Errorf("%s: %w: stop it first", comp.name, ErrRunning)
	}
	if err := comp.start(c); err != nil {
		return err
	}
	if err := comp.ready(c, ctx); err != nil {
		return fmt.Errorf("restarted %s: %w", comp.name, err)
	}
	c.logf("%s ready again", comp.name)
	return nil
}

// waitKubeletHealthy waits until the kubelet's /healthz answers ok.
func (c *Cluster) waitKubeletHealthy(ctx context.Context) error {
	hc := c.HTTPClient(nil)
	hc.Timeout = 2 * time.Second
	c.mu.Lock()
	p := c.kubelet
	c.mu.Unlock()
	return c.poll(ctx, "kubelet /healthz", p, func() (bool, error) {
		resp, err := hc.Get("http://127.0.0.1:10248/healthz")
		if err != nil {
			return false, nil
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == http.StatusOK && strings.TrimSpace(string(b)) == "ok", nil
	})
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
