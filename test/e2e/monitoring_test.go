package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/emptydir-guard/emptydir-guard/internal/testbin"
	"github.com/emptydir-guard/emptydir-guard/remediator"
	"github.com/emptydir-guard/emptydir-guard/test/cluster"
	"github.com/emptydir-guard/emptydir-guard/test/monitoring"
)

// Addresses inside the cluster's namespace used by the scenario (other e2e tests use 1973x/1974x).
const (
	scnExporterAddr       = "127.0.0.1:19801"
	scnRemediatorAddr     = "127.0.0.1:19802"
	scnDryRunAddr         = "127.0.0.1:19803"
	scnRecorderAddr       = "127.0.0.1:19804"
	scnKubeletExporterAdr = "127.0.0.1:19805"
	scnPrometheusAddr     = "127.0.0.1:19890"
	scnAlertmanagerAddr   = "127.0.0.1:19893"

	// dryRunOnlyLabel keeps the main remediator (--policy.pod-selector) away from the pod that only
	// the dry-run remediator is asked about.
	dryRunOnlyLabel = "e2e.emptydir-guard.io/dry-run-only"
)

// exporterInterval is the exporter's collection interval in the scenario: the scrape
// interval, so that a measurement waits at most one scrape for Prometheus (a cycle of the
// exporter costs milliseconds on a node). deploy/exporter.yaml says 10s;
// EMPTYDIR_GUARD_EXPORTER_INTERVAL=10s measures with that.
var exporterInterval = func() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("EMPTYDIR_GUARD_EXPORTER_INTERVAL")); err == nil && d > 0 {
		return d
	}
	return 5 * time.Second
}()

// stack is the monitoring and remediation chain of the scenario, all inside the cluster's
// namespace: exporter → Prometheus (project rules) → Alertmanager (project route) →
// recording proxy → remediator → live re-check at the exporter → Eviction API.
type stack struct {
	c          *cluster.Cluster
	mon        *monitoring.Stack
	token      string
	tokenFile  string
	recorder   *webhookRecorder
	exporterLg string // log names, for c.LogPath
	remediLg   string
	dryRunLg   string
}

type stackOptions struct {
	// remediatorArgs are appended to the main remediator's flags.
	remediatorArgs []string
	// dryRun also starts a --eviction.dry-run remediator on scnDryRunAddr (scraped as well).
	dryRun bool
	// brokenKubeletExporter also starts a second exporter with --collection.source=kubelet; on a cluster
	// with localStorageCapacityIsolation=false its Summary API fails, so the measurement
	// error metrics and their dashboard panel have data.
	brokenKubeletExporter bool
}

func startStack(ctx context.Context, t testing.TB, c *cluster.Cluster, o stackOptions) *stack {
	t.Helper()
	exporterBin, remediatorBin := testbin.Path(t, "emptydir-exporter"), testbin.Path(t, "emptydir-remediator")
	s := &stack{c: c, token: "e2e-" + randSuffix() + randSuffix(), exporterLg: "scn-exporter", remediLg: "scn-remediator", dryRunLg: "scn-remediator-dry-run"}
	s.tokenFile = filepath.Join(c.WorkDir(), "scn-webhook-token")
	if err := os.WriteFile(s.tokenFile, []byte(s.token), 0o600); err != nil {
		t.Fatal(err)
	}
	startInNetns(t, c, s.exporterLg, exporterBin,
		"--node.name="+c.NodeName(), "--kubeconfig="+c.KubeconfigPath(),
		"--kubelet.root-dir="+c.KubeletRootDir(), "--collection.interval="+exporterInterval.String(),
		"--web.listen-address="+scnExporterAddr)
	exporterTargets := []string{scnExporterAddr}
	if o.brokenKubeletExporter {
		startInNetns(t, c, "scn-exporter-kubelet", exporterBin,
			"--node.name="+c.NodeName(), "--kubeconfig="+c.KubeconfigPath(), "--collection.source=kubelet",
			"--kubelet.via-apiserver", "--collection.interval="+exporterInterval.String(),
			"--web.listen-address="+scnKubeletExporterAdr)
		exporterTargets = append(exporterTargets, scnKubeletExporterAdr)
	}
	common := []string{"--kubeconfig=" + c.KubeconfigPath(), "--web.bearer-token-file=" + s.tokenFile,
		"--exporter.url=http://" + scnExporterAddr, "--log.level=debug"}
	startInNetns(t, c, s.remediLg, remediatorBin, append(append(common, "--web.listen-address="+scnRemediatorAddr), o.remediatorArgs...)...)
	remediatorTargets := []string{scnRemediatorAddr}
	if o.dryRun {
		startInNetns(t, c, s.dryRunLg, remediatorBin, append(common, "--web.listen-address="+scnDryRunAddr, "--eviction.dry-run")...)
		remediatorTargets = append(remediatorTargets, scnDryRunAddr)
	}

	var err error
	s.recorder, err = newWebhookRecorder(c, scnRecorderAddr, "http://"+scnRemediatorAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.recorder.Close)

	s.mon, err = monitoring.Start(ctx, c, monitoring.Options{
		RulesFiles:         []string{"../../rules/emptydir-guard.rules.yml"},
		AlertmanagerConfig: "../../deploy/alertmanager/alertmanager.yml",
		ExporterTargets:    exporterTargets,
		RemediatorTargets:  remediatorTargets,
		WebhookURL:         "http://" + scnRecorderAddr + "/webhook",
		WebhookToken:       s.token,
		PrometheusAddr:     scnPrometheusAddr,
		AlertmanagerAddr:   scnAlertmanagerAddr,
		ScrapeInterval:     5 * time.Second,
		GroupWait:          time.Second,
		GroupInterval:      5 * time.Second,
		RepeatInterval:     10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.mon.Stop()
		if t.Failed() {
			for _, n := range []string{"prometheus", "alertmanager"} {
				if b, err := os.ReadFile(c.LogPath(n)); err == nil {
					t.Logf("--- %s log (tail) ---\n%s", n, tail(string(b), 3000))
				}
			}
		}
	})
	// Every target up before the scenario starts, so the timings do not include start-up.
	want := len(exporterTargets) + len(remediatorTargets)
	eventually(t, 60*time.Second, time.Second, "all scrape targets up", func() (bool, string) {
		res, err := s.mon.Query(ctx, `up == 1`)
		if err != nil {
			return false, err.Error()
		}
		return len(res) == want, fmt.Sprintf("%d of %d targets up", len(res), want)
	})
	return s
}

// webhookRecorder is a transparent reverse proxy between Alertmanager and the remediator,
// listening inside the namespace: it timestamps each notification and keeps its
// Authorization header, payload, status and answer, so the test can show that Alertmanager
// sent the token and what the remediator answered, and when.
type webhookRecorder struct {
	srv *http.Server
	mu  sync.Mutex
	got []recordedWebhook
}

type recordedWebhook struct {
	Received, Answered time.Time
	Authorization      string
	Payload            remediator.Payload
	Code               int
	Response           remediator.WebhookResponse
}

func newWebhookRecorder(c *cluster.Cluster, listen, target string) (*webhookRecorder, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	l, err := c.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("recorder listen: %w", err)
	}
	r := &webhookRecorder{}
	proxy := httputil.NewSingleHostReverseProxy(u)
	proxy.Transport = c.HTTPClient(nil).Transport
	type ctxKey struct{}
	proxy.ModifyResponse = func(resp *http.Response) error {
		rec, _ := resp.Request.Context().Value(ctxKey{}).(*recordedWebhook)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(body))
		if rec != nil {
			rec.Answered, rec.Code = time.Now(), resp.StatusCode
			_ = json.Unmarshal(body, &rec.Response)
			r.mu.Lock()
			r.got = append(r.got, *rec)
			r.mu.Unlock()
		}
		return err
	}
	r.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		rec := &recordedWebhook{Received: time.Now(), Authorization: req.Header.Get("Authorization")}
		body, _ := io.ReadAll(req.Body)
		_ = json.Unmarshal(body, &rec.Payload)
		req.Body = io.NopCloser(bytes.NewReader(body))
		proxy.ServeHTTP(w, req.WithContext(context.WithValue(req.Context(), ctxKey{}, rec)))
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.srv.Serve(l) }()
	return r, nil
}

func (r *webhookRecorder) Close() { _ = r.srv.Close() }

// forUID returns the recorded notifications that carry an alert for that pod UID.
func (r *webhookRecorder) forUID(uid string) []recordedWebhook {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []recordedWebhook
	for _, w := range r.got {
		for _, a := range w.Payload.Alerts {
			if a.Labels["uid"] == uid {
				out = append(out, w)
				break
			}
		}
	}
	return out
}

// outcomeFor returns the remediator's answer for that UID in a recorded notification.
func outcomeFor(w recordedWebhook, uid string) (remediator.AlertResult, bool) {
	for _, a := range w.Response.Alerts {
		if a.Target.UID == uid {
			return a, true
		}
	}
	return remediator.AlertResult{}, false
}

// overLimitPayload is the payload Alertmanager would send for EmptyDirOverLimit of one volume.
func overLimitPayload(node, ns, pod, uid, volume string) []byte {
	labels := map[string]string{"alertname": "EmptyDirOverLimit", "namespace": ns, "pod": pod, "uid": uid,
		"volume": volume, "node": node, "severity": "critical", "remediation": "evict"}
	p := remediator.Payload{Version: "4", Status: remediator.StatusFiring, Receiver: "emptydir-remediator",
		GroupKey:    fmt.Sprintf(`{}/{remediation="evict"}:{namespace=%q, pod=%q, uid=%q, volume=%q}`, ns, pod, uid, volume),
		GroupLabels: map[string]string{"namespace": ns, "pod": pod, "uid": uid, "volume": volume}, CommonLabels: labels,
		Alerts: []remediator.Alert{{Status: remediator.StatusFiring, Labels: labels, StartsAt: time.Now().Add(-time.Minute),
			Fingerprint: "e2e" + strings.ReplaceAll(uid, "-", "")[:13]}}}
	b, _ := json.Marshal(p)
	return b
}

// postWebhook posts a payload straight to a remediator (not through Alertmanager).
func postWebhook(ctx context.Context, c *cluster.Cluster, addr, token string, body []byte) (int, remediator.WebhookResponse, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/webhook", bytes.NewReader(body))
	if err != nil {
		return 0, remediator.WebhookResponse{}, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.HTTPClient(nil).Do(req)
	if err != nil {
		return 0, remediator.WebhookResponse{}, "", err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var wr remediator.WebhookResponse
	_ = json.Unmarshal(raw, &wr)
	return resp.StatusCode, wr, string(raw), nil
}

// podTracker polls one pod instance and records when it was first seen terminating
// (deletionTimestamp: an Eviction API call or a delete), Failed (the kubelet's own eviction
// sets phase Failed, reason Evicted) or gone.
type podTracker struct {
	ns, name, uid string
	mu            sync.Mutex
	terminating   time.Time
	failed        time.Time
	gone          time.Time
	reason, msg   string
	cancel        context.CancelFunc
	done          chan struct{}
}

func trackPod(ctx context.Context, c *cluster.Cluster, p *corev1.Pod) *podTracker {
	pollCtx, cancel := context.WithCancel(ctx)
	tr := &podTracker{ns: p.Namespace, name: p.Name, uid: string(p.UID), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(tr.done)
		// Until the pod is gone, ctx ends or Stop: its error is only that end. The Get uses
		// ctx, not pollCtx: Stop lets a poll under way finish and record.
		_ = wait.PollUntilContextCancel(pollCtx, 200*time.Millisecond, true, func(context.Context) (bool, error) {
			got, err := c.Client().CoreV1().Pods(tr.ns).Get(ctx, tr.name, metav1.GetOptions{})
			now := time.Now()
			tr.mu.Lock()
			defer tr.mu.Unlock()
			switch {
			case apierrors.IsNotFound(err) || (err == nil && string(got.UID) != tr.uid):
				if tr.gone.IsZero() {
					tr.gone = now
				}
			case err == nil:
				if got.DeletionTimestamp != nil && tr.terminating.IsZero() {
					tr.terminating = now
				}
				if got.Status.Phase == corev1.PodFailed && tr.failed.IsZero() {
					tr.failed, tr.reason, tr.msg = now, got.Status.Reason, got.Status.Message
				}
			}
			return !tr.gone.IsZero(), nil
		})
	}()
	return tr
}

// evicted returns the first time the pod was seen terminating, Failed or gone.
func (tr *podTracker) evicted() time.Time {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	first := time.Time{}
	for _, t := range []time.Time{tr.terminating, tr.failed, tr.gone} {
		if !t.IsZero() && (first.IsZero() || t.Before(first)) {
			first = t
		}
	}
	return first
}

func (tr *podTracker) snapshot() (terminating, failed, gone time.Time, reason, msg string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.terminating, tr.failed, tr.gone, tr.reason, tr.msg
}

func (tr *podTracker) Stop() {
	tr.cancel()
	<-tr.done
}

// firstSeen polls a source every interval and records, per key, when a poll first listed it.
type firstSeen struct {
	mu     sync.Mutex
	first  map[string]time.Time
	cancel context.CancelFunc
	done   chan struct{}
}

// pollFirstSeen calls list every interval until ctx ends or Stop; a failed poll records nothing.
func pollFirstSeen(ctx context.Context, interval time.Duration, list func(context.Context) ([]string, error)) *firstSeen {
	pollCtx, cancel := context.WithCancel(ctx)
	w := &firstSeen{first: map[string]time.Time{}, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		// list gets ctx, not pollCtx: Stop lets a poll under way finish and record.
		wait.UntilWithContext(pollCtx, func(context.Context) {
			keys, err := list(ctx)
			now := time.Now()
			if err != nil {
				return
			}
			w.mu.Lock()
			defer w.mu.Unlock()
			for _, k := range keys {
				if k != "" && w.first[k].IsZero() {
					w.first[k] = now
				}
			}
		}, interval)
	}()
	return w
}

// at returns when key was first seen; zero when never.
func (w *firstSeen) at(key string) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.first[key]
}

func (w *firstSeen) Stop() { w.cancel(); <-w.done }

// watchAlertmanager records when Alertmanager first held EmptyDirOverLimit, per UID.
func watchAlertmanager(ctx context.Context, mon *monitoring.Stack) *firstSeen {
	return pollFirstSeen(ctx, 250*time.Millisecond, func(ctx context.Context) ([]string, error) {
		alerts, err := mon.AlertmanagerAlerts(ctx, `alertname="EmptyDirOverLimit"`)
		uids := make([]string, 0, len(alerts))
		for _, a := range alerts {
			uids = append(uids, a.Labels["uid"])
		}
		return uids, err
	})
}

var logTime = regexp.MustCompile(`(?:^|\s)(?:time|ts)=(\S+)`)

// logLineTime returns the time of the first line of a logfmt log that contains all of subs.
func logLineTime(path string, subs ...string) (time.Time, bool) {
	f, err := os.Open(path)
	if err != nil {
		return time.Time{}, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
next:
	for sc.Scan() {
		line := sc.Text()
		for _, s := range subs {
			if !strings.Contains(line, s) {
				continue next
			}
		}
		if m := logTime.FindStringSubmatch(line); m != nil {
			if t, err := time.Parse(time.RFC3339Nano, strings.Trim(m[1], `"`)); err == nil {
				return t, true
			}
		}
	}
	return time.Time{}, false
}

// firstOver returns the first raw sample of a range result whose value exceeds v.
func firstOver(res []monitoring.Sample, v float64) (monitoring.Point, bool) {
	var best monitoring.Point
	found := false
	for _, s := range res {
		for _, p := range s.Values {
			if p.Value > v && (!found || p.Time.Before(best.Time)) {
				best, found = p, true
			}
		}
	}
	return best, found
}

// dashboardExprs returns every panel target expression of dashboards/*.json (rows included).
func dashboardExprs(t testing.TB) []dashQuery {
	t.Helper()
	paths, _ := filepath.Glob("../../dashboards/*.json")
	if len(paths) == 0 {
		t.Fatal("no dashboards/*.json")
	}
	type panel struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
		Panels []json.RawMessage `json:"panels"`
	}
	var out []dashQuery
	var walk func(dash string, raws []json.RawMessage)
	walk = func(dash string, raws []json.RawMessage) {
		for _, raw := range raws {
			var p panel
			if err := json.Unmarshal(raw, &p); err != nil {
				t.Fatalf("%s: %v", dash, err)
			}
			for _, tg := range p.Targets {
				if tg.Expr != "" {
					out = append(out, dashQuery{dash, p.Title, tg.Expr})
				}
			}
			walk(dash, p.Panels)
		}
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var d struct {
			Panels []json.RawMessage `json:"panels"`
		}
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		walk(filepath.Base(p), d.Panels)
	}
	return out
}

type dashQuery struct{ dashboard, panel, expr string }

// substituteGrafana replaces Grafana's variables as dashboards/generator's tests do (same
// durations), with real values for the dashboards' own variables.
func substituteGrafana(expr string, vars map[string]string) string {
	r := []string{"${__rate_interval}", "5m", "$__rate_interval", "5m", "${__interval}", "1m", "$__interval", "1m",
		"${__range}", "3h", "$__range", "3h"}
	for k, v := range vars {
		r = append(r, "${"+k+"}", v, "$"+k, v)
	}
	return strings.NewReplacer(r...).Replace(expr)
}

// duOf is duBytes without testing.TB, for goroutines: GNU du -s -B1 of a folder.
func duOf(dir string) (int64, error) {
	out, err := exec.Command("du", "-s", "-B1", dir).Output()
	if err != nil {
		return 0, fmt.Errorf("du %s: %w", dir, err)
	}
	f := strings.Fields(string(out))
	if len(f) == 0 {
		return 0, fmt.Errorf("du %s: empty output", dir)
	}
	return strconv.ParseInt(f[0], 10, 64)
}
