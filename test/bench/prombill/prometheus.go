package prombill

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// promServer is a running Prometheus with its own temporary directory.
type promServer struct {
	base string // http://127.0.0.1:port
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
	once sync.Once
}

// prometheusVersion is the first line of `prometheus --version`.
func prometheusVersion(bin string) (string, error) {
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s --version: %w: %s", bin, err, out)
	}
	line, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(line), nil
}

// freeLoopbackAddr is a loopback host:port nothing listens on now.
func freeLoopbackAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("finding a free port: %w", err)
	}
	addr := ln.Addr().String()
	return addr, ln.Close()
}

// startPrometheus writes config (made for addr) and a copy of the rules file into a new
// temporary directory and starts bin on addr. Call stop on every path, also after an error.
func startPrometheus(bin, addr string, config func(ruleFile string) ([]byte, error), rulesFile string) (*promServer, error) {
	dir, err := os.MkdirTemp("", "prombill-")
	if err != nil {
		return nil, fmt.Errorf("temporary directory: %w", err)
	}
	p := &promServer{base: "http://" + addr, dir: dir, done: make(chan struct{})}
	rules, err := os.ReadFile(rulesFile)
	if err != nil {
		return p, fmt.Errorf("reading the rules: %w", err)
	}
	ruleCopy := filepath.Join(dir, filepath.Base(rulesFile))
	if err := os.WriteFile(ruleCopy, rules, 0o644); err != nil {
		return p, fmt.Errorf("copying the rules: %w", err)
	}
	cfg, err := config(ruleCopy)
	if err != nil {
		return p, err
	}
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, cfg, 0o644); err != nil {
		return p, fmt.Errorf("writing prometheus.yml: %w", err)
	}
	logFile, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		return p, fmt.Errorf("prometheus log: %w", err)
	}
	defer logFile.Close()
	p.cmd = exec.Command(bin, "--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	// A benchmark killed by its timeout runs no cleanup: Prometheus must not outlive it.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		p.cmd = nil
		return p, fmt.Errorf("starting %s: %w", bin, err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	return p, nil
}

// waitReady waits until /-/ready answers 200, Prometheus exits or timeout passes.
func (p *promServer) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		resp, err := http.Get(p.base + "/-/ready")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-p.done:
			return fmt.Errorf("prometheus exited before it was ready: %s", p.logTail())
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("prometheus not ready within %v: %s", timeout, p.logTail())
		}
	}
}

// logTail is the end of Prometheus' log, for errors.
func (p *promServer) logTail() string {
	b, err := os.ReadFile(filepath.Join(p.dir, "prometheus.log"))
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	const keep = 2000
	if len(b) > keep {
		b = b[len(b)-keep:]
	}
	return string(bytes.TrimSpace(b))
}

// stop kills Prometheus, waits for it and removes its directory; it may be called again.
func (p *promServer) stop() {
	p.once.Do(func() {
		if p.cmd != nil && p.cmd.Process != nil {
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		_ = os.RemoveAll(p.dir)
	})
}

// apiGet decodes the data of a successful API answer into out.
func (p *promServer) apiGet(ctx context.Context, path string, q url.Values, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.base+path+"?"+q.Encode(), nil)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	defer resp.Body.Close()
	var env struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		return fmt.Errorf("%s: decoding: %w", path, err)
	}
	if env.Status != "success" {
		return fmt.Errorf("%s: %s (HTTP %d)", path, env.Error, resp.StatusCode)
	}
	if err := json.Unmarshal(env.Data, out); err != nil {
		return fmt.Errorf("%s: decoding data: %w", path, err)
	}
	return nil
}

// sample is one element of an instant vector.
type sample struct {
	labels map[string]string
	value  float64
}

// queryAll evaluates the vector expression expr at at.
func (p *promServer) queryAll(ctx context.Context, expr string, at time.Time) ([]sample, error) {
	var data struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		} `json:"result"`
	}
	q := url.Values{"query": {expr}, "time": {strconv.FormatFloat(float64(at.UnixMilli())/1e3, 'f', 3, 64)}}
	if err := p.apiGet(ctx, "/api/v1/query", q, &data); err != nil {
		return nil, fmt.Errorf("query %s: %w", expr, err)
	}
	if data.ResultType != "vector" {
		return nil, fmt.Errorf("query %s: want a vector, got %s", expr, data.ResultType)
	}
	var out []sample
	for _, r := range data.Result {
		s, ok := r.Value[1].(string)
		if !ok {
			return nil, fmt.Errorf("query %s: value %v is no string", expr, r.Value[1])
		}
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("query %s: %w", expr, err)
		}
		out = append(out, sample{labels: r.Metric, value: v})
	}
	return out, nil
}

// query evaluates expr at at; it must give exactly one sample.
func (p *promServer) query(ctx context.Context, expr string, at time.Time) (float64, error) {
	all, err := p.queryAll(ctx, expr, at)
	if err != nil {
		return 0, err
	}
	if len(all) != 1 {
		return 0, fmt.Errorf("query %s: want one sample, got %d", expr, len(all))
	}
	return all[0].value, nil
}

// ruleGroup is one rule group's last evaluation, as /api/v1/rules reports it (client_golang's
// v1.RuleGroup leaves out the group's evaluationTime and lastEvaluation).
type ruleGroup struct {
	Name           string    `json:"name"`
	Interval       float64   `json:"interval"` // seconds
	EvaluationTime float64   `json:"evaluationTime"`
	LastEvaluation time.Time `json:"lastEvaluation"`
}

// ruleGroups are the loaded rule groups, in file order.
func (p *promServer) ruleGroups(ctx context.Context) ([]ruleGroup, error) {
	var data struct {
		Groups []ruleGroup `json:"groups"`
	}
	if err := p.apiGet(ctx, "/api/v1/rules", url.Values{}, &data); err != nil {
		return nil, err
	}
	if len(data.Groups) == 0 {
		return nil, errors.New("/api/v1/rules: no rule group loaded")
	}
	return data.Groups, nil
}

// targetErrors counts the active targets' last scrape errors by error, for a run whose
// targets are not all up.
func (p *promServer) targetErrors(ctx context.Context) (map[string]int, error) {
	var data struct {
		ActiveTargets []struct {
			LastError string `json:"lastError"`
			Health    string `json:"health"`
		} `json:"activeTargets"`
	}
	if err := p.apiGet(ctx, "/api/v1/targets", url.Values{"state": {"active"}}, &data); err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, t := range data.ActiveTargets {
		if t.Health != "up" {
			out[t.LastError]++
		}
	}
	return out, nil
}
