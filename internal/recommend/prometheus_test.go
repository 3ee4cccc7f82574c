package recommend

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"
)

// rawSeries is one series of the exporter's, sampled every minute of the data: value gives
// its sample at minute m, or false where it has none.
type rawSeries struct {
	name   string
	labels string
	value  func(m int) (float64, bool)
}

// history is three days of a small cluster's usage, every minute: what each workload's pods
// did is said beside it.
func history() (minutes int, series []rawSeries) {
	const days = 3
	minutes = days * 24 * 60
	rng := rand.New(rand.NewPCG(32, 5))
	noise := make([]float64, minutes)
	for i := range noise {
		noise[i] = rng.Float64()
	}
	during := func(from, to int, v func(m int) float64) func(int) (float64, bool) {
		return func(m int) (float64, bool) {
			if m < from || m >= to {
				return 0, false
			}
			return v(m), true
		}
	}
	pod := func(ns, name, uid, node, kind, workload string) string {
		return fmt.Sprintf(`node=%q,namespace=%q,pod=%q,uid=%q`, node, ns, name, uid)
	}
	info := func(ns, name, uid, node, kind, workload string, from, to int) rawSeries {
		return rawSeries{"emptydir_pod_workload_info", pod(ns, name, uid, node, kind, workload) +
			fmt.Sprintf(`,workload_kind=%q,workload=%q`, kind, workload), during(from, to, func(int) float64 { return 1 })}
	}
	const mi = 1 << 20
	slow, fast := `job="emptydir-exporter-slow",`, `job="emptydir-exporter",`
	// Deployment cart: cart-a until minute 2200, then cart-b from 2170 (a rollout: both for
	// 30 minutes), on another node, with a sizeLimit, so its volume's usage is also a trigger
	// series of the fast scrape job. cart-a spikes to 2GiB for a minute; its memory volume
	// gets no suggestion.
	cacheA := func(m int) float64 {
		if m == 1000 {
			return 2048 * mi
		}
		return 200*mi + noise[m]*100*mi
	}
	cacheB := func(m int) float64 { return 150*mi + noise[(m*7)%minutes]*300*mi }
	appA := func(m int) float64 { return 40*mi + noise[(m*3)%minutes]*20*mi }
	appB := func(m int) float64 { return 30*mi + noise[(m*5)%minutes]*60*mi }
	a := pod("shop", "cart-7d9f8c6b5-aaaaa", "ua", "n1", "", "")
	b := pod("shop", "cart-5c4d3b2a1-bbbbb", "ub", "n2", "", "")
	series = append(series,
		info("shop", "cart-7d9f8c6b5-aaaaa", "ua", "n1", "Deployment", "cart", 0, 2200),
		info("shop", "cart-5c4d3b2a1-bbbbb", "ub", "n2", "Deployment", "cart", 2170, minutes),
		rawSeries{"emptydir_used_bytes", slow + a + `,volume="cache",medium="disk"`, during(0, 2200, cacheA)},
		rawSeries{"emptydir_used_bytes", slow + a + `,volume="shm",medium="memory"`, during(0, 2200, func(int) float64 { return 4096 * mi })},
		rawSeries{"emptydir_used_bytes", slow + b + `,volume="cache",medium="disk"`, during(2170, minutes, cacheB)},
		rawSeries{"emptydir_used_bytes", fast + b + `,volume="cache",medium="disk"`, during(2170, minutes, cacheB)},
		rawSeries{"emptydir_limit_bytes", fast + b + `,volume="cache",medium="disk"`, during(2170, minutes, func(int) float64 { return 1024 * mi })},
		rawSeries{"emptydir_container_ephemeral_storage_used_bytes", fast + a + `,container="app"`, during(0, 2200, appA)},
		rawSeries{"emptydir_container_ephemeral_storage_used_bytes", fast + b + `,container="app"`, during(2170, minutes, appB)},
		rawSeries{"emptydir_pod_ephemeral_storage_used_bytes", fast + a, during(0, 2200, func(m int) float64 { return cacheA(m) + appA(m) + mi })},
		rawSeries{"emptydir_pod_ephemeral_storage_used_bytes", fast + b, during(2170, minutes, func(m int) float64 { return cacheB(m) + appB(m) + mi })},
	)
	// StatefulSet db: db-0 recreated under its own name after an hour's gap (a new uid), its
	// volume growing by 512KiB a minute from empty in each pod; its container restarts every
	// 12 hours, its writable layer starting over.
	data := func(start int) func(int) float64 { return func(m int) float64 { return float64(m-start) * mi / 2 } }
	db := func(m int) float64 { return float64(m%720)*mi/16 + noise[m]*5*mi }
	d1 := pod("shop", "db-0", "d1", "n1", "", "")
	d2 := pod("shop", "db-0", "d2", "n2", "", "")
	series = append(series,
		info("shop", "db-0", "d1", "n1", "StatefulSet", "db", 0, 1500),
		info("shop", "db-0", "d2", "n2", "StatefulSet", "db", 1560, minutes),
		rawSeries{"emptydir_used_bytes", slow + d1 + `,volume="data",medium="disk"`, during(0, 1500, data(0))},
		rawSeries{"emptydir_used_bytes", slow + d2 + `,volume="data",medium="disk"`, during(1560, minutes, data(1560))},
		rawSeries{"emptydir_container_ephemeral_storage_used_bytes", fast + d1 + `,container="db"`, during(0, 1500, db)},
		rawSeries{"emptydir_container_ephemeral_storage_used_bytes", fast + d2 + `,container="db"`, during(1560, minutes, db)},
		rawSeries{"emptydir_container_ephemeral_storage_limit_bytes", fast + d2 + `,container="db"`, during(1560, minutes, func(int) float64 { return 512 * mi })},
	)
	// Job backup-29412345: 5 hours only, too little history. Bare pod debug: 10MiB, the
	// least suggestion.
	j := pod("ops", "backup-29412345-xxxxx", "j1", "n1", "", "")
	d := pod("ops", "debug", "p1", "n2", "", "")
	series = append(series,
		info("ops", "backup-29412345-xxxxx", "j1", "n1", "Job", "backup-29412345", minutes-300, minutes),
		rawSeries{"emptydir_used_bytes", slow + j + `,volume="work",medium="disk"`, during(minutes-300, minutes, func(int) float64 { return 500 * mi })},
		info("ops", "debug", "p1", "n2", "Pod", "debug", 0, minutes),
		rawSeries{"emptydir_used_bytes", slow + d + `,volume="tmp",medium="disk"`, during(0, minutes, func(int) float64 { return 10 * mi })},
	)
	return minutes, series
}

// openMetrics writes series as OpenMetrics text from start, one sample a minute, each
// family's series together as the format wants them.
func openMetrics(start time.Time, minutes int, series []rawSeries) string {
	var b strings.Builder
	byName := map[string][]rawSeries{}
	for _, s := range series {
		byName[s.name] = append(byName[s.name], s)
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&b, "# TYPE %s gauge\n", n)
		for _, s := range byName[n] {
			for m := range minutes {
				if v, ok := s.value(m); ok {
					fmt.Fprintf(&b, "%s{%s} %v %d\n", n, s.labels, v, start.Add(time.Duration(m)*time.Minute).Unix())
				}
			}
		}
	}
	b.WriteString("# EOF\n")
	return b.String()
}

// prometheus is a Prometheus server the test started on dir.
type prometheus struct {
	url string
	api promv1.API
	cmd *exec.Cmd
}

// startPrometheus runs bin on the TSDB in dir with the rule files, until stop or the test's end.
func startPrometheus(t *testing.T, bin, dir string, ruleFiles ...string) *prometheus {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cfg, err := yaml.Marshal(map[string]any{"global": map[string]any{"evaluation_interval": "1s"}, "rule_files": ruleFiles})
	if err != nil {
		t.Fatal(err)
	}
	cfgFile := filepath.Join(t.TempDir(), "prometheus.yml")
	if err := os.WriteFile(cfgFile, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config.file="+cfgFile, "--storage.tsdb.path="+dir, "--web.listen-address="+addr,
		"--storage.tsdb.retention.time=30d", "--log.level=warn")
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &prometheus{url: "http://" + addr, cmd: cmd}
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("prometheus log:\n%s", logs.String())
		}
	})
	client, err := promapi.NewClient(promapi.Config{Address: p.url})
	if err != nil {
		t.Fatal(err)
	}
	p.api = promv1.NewAPI(client)
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get(p.url + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus not ready after a minute: %v\n%s", err, logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (p *prometheus) stop() {
	if p.cmd.Process == nil || p.cmd.ProcessState != nil {
		return
	}
	_ = p.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}

// recommendationRecords writes the step series' rules of the rules file alone, for
// promtool's backfill (which cannot evaluate rules reading other rules).
func recommendationRecords(t *testing.T, path string) {
	t.Helper()
	_, records := recommendationRules(t)
	var rules []map[string]string
	for _, s := range kinds {
		rules = append(rules, map[string]string{"record": s.step, "expr": records[s.step]})
	}
	b, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "steps", "interval": "5m", "rules": rules}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestRecommendRulesMatchTheMethod: on three days of a small cluster's usage in a real
// Prometheus, the recording rules, as shipped, record the same peak, quantile, history and
// suggestions as Recommend computes, from the recorded points and from the exporter's series
// alone. The points are backfilled with promtool at multiples of 5 minutes, as a 5m group
// evaluates (at another phase) and as Recommend's subquery does; the 7-day figures are then
// evaluated live by Prometheus from the rules file.
func TestRecommendRulesMatchTheMethod(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not found (Debian package prometheus; make deps installs it)")
	}
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Skip("prometheus not found (Debian package prometheus; make deps installs it)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	minutes, series := history()
	// The data ends 20 minutes ago: no step the live rules evaluate holds any of it, so the
	// points are the backfilled ones only.
	end := time.Now().Add(-20 * time.Minute).Truncate(Step)
	start := end.Add(-time.Duration(minutes) * time.Minute)
	tmp := t.TempDir()
	data, blocks := filepath.Join(tmp, "data"), filepath.Join(tmp, "blocks")
	om := filepath.Join(tmp, "history.om")
	if err := os.WriteFile(om, []byte(openMetrics(start, minutes, series)), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) {
		t.Helper()
		out, err := exec.CommandContext(ctx, promtool, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run("tsdb", "create-blocks-from", "openmetrics", "--quiet", om, data)

	steps := filepath.Join(tmp, "steps.yml")
	recommendationRecords(t, steps)
	raw := startPrometheus(t, bin, data)
	run("tsdb", "create-blocks-from", "rules", "--quiet", "--url="+raw.url, "--output-dir="+blocks,
		fmt.Sprintf("--start=%d", start.Unix()), fmt.Sprintf("--end=%d", end.Add(2*Step).Unix()), steps)
	raw.stop()
	moved, err := os.ReadDir(blocks)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range moved {
		if err := os.Rename(filepath.Join(blocks, b.Name()), filepath.Join(data, b.Name())); err != nil {
			t.Fatal(err)
		}
	}

	// The shipped rules, evaluated every second instead of every 5 minutes: the points stand
	// still, so the 7-day figures are the same at any evaluation, and the test need not wait
	// for the group's first.
	shipped, err := os.ReadFile("../../rules/emptydir-guard.rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	rules := filepath.Join(tmp, "rules.yml")
	fast := strings.ReplaceAll(string(shipped), "interval: 5m\n", "interval: 1s\n")
	if err := os.WriteFile(rules, []byte(fast), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startPrometheus(t, bin, data, rules)

	// What the rules recorded, by target and figure.
	type figure struct {
		t    Target
		name string
	}
	recorded := map[figure]float64{}
	figures := map[string]string{":max7d": "peak", ":quantile95_7d": "quantile", "_recommendation_history_seconds:7d": "history",
		"_request_bytes:suggested": "request", "_limit_bytes:suggested": "limit"}
	kindOf := map[string]Kind{"namespace_workload_volume": KindVolume, "namespace_workload_container": KindContainer, "namespace_workload": KindPod}
	at := time.Now()
	for deadline := time.Now().Add(time.Minute); ; {
		v, _, _, err := p.api.Query(ctx, `{__name__=~"namespace_workload.*:.*:(max7d|quantile95_7d|7d|suggested)"}`, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		clear(recorded)
		for _, s := range v.(model.Vector) {
			name := string(s.Metric[model.MetricNameLabel])
			level, _, _ := strings.Cut(name, ":")
			k := kindOf[level]
			fig := ""
			for suffix, f := range figures {
				if strings.HasSuffix(name, suffix) {
					fig = f
				}
			}
			recorded[figure{target(s.Metric, k, kinds[k].label), fig}] = float64(s.Value)
			at = s.Timestamp.Time()
		}
		if len(recorded) > 0 && v.(model.Vector).Len() == len(recorded) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the rules recorded %d figures within a minute", len(recorded))
		}
		time.Sleep(time.Second)
	}

	t.Logf("the rules recorded %d figures", len(recorded))
	for _, src := range []Source{SourceRecorded, SourceRaw} {
		t.Run(string(src), func(t *testing.T) {
			ss, err := Recommend(ctx, p.api, Query{Config: DefaultConfig(), Source: src, At: at})
			if err != nil {
				t.Fatal(err)
			}
			seen := map[figure]bool{}
			check := func(s Suggestion, fig string, got float64, has bool) {
				t.Helper()
				f := figure{s.Target, fig}
				want, ok := recorded[f]
				seen[f] = ok
				switch {
				case ok != has:
					t.Errorf("%s %s: the method has one %v, the rules %v (%v)", fmtTarget(s.Target), fig, has, ok, want)
				case ok && src == SourceRaw && (fig == "quantile" || fig == "request"):
					// The subquery's points are at multiples of 5 minutes, the group's at its
					// own phase within them: the same method over other instants. Peaks do not
					// depend on the phase (every sample falls in one step either way), a
					// quantile does.
					if math.Abs(got-want) > 0.02*want && Round(got) != Round(want) {
						t.Errorf("%s %s: the method %v from the exporter's series, the rules %v", fmtTarget(s.Target), fig, got, want)
					}
				case ok && src == SourceRaw && fig == "history":
					// How many 5-minute points a stretch of measurements spans depends on that
					// phase too: a step more or less at each stretch, one per pod here (make test
					// runs: 259500 s against 259200 s for one stretch, 256200 s against 255600 s
					// for db's two pods around a gap).
					if steps := float64(max(1, s.Pods)); math.Abs(got-want) > steps*Step.Seconds() {
						t.Errorf("%s %s: the method %v s from the exporter's series, the rules %v s: more than %v steps apart", fmtTarget(s.Target), fig, got, want, steps)
					}
				case ok && got != want:
					t.Errorf("%s %s: the method %v, the rules %v", fmtTarget(s.Target), fig, got, want)
				}
			}
			for _, s := range ss {
				suggested := s.Insufficient == ""
				check(s, "peak", s.Peak, true)
				check(s, "quantile", s.Quantile, true)
				check(s, "history", s.History.Seconds(), true)
				check(s, "request", s.Request, suggested && s.Kind != KindVolume)
				if s.RaisedForPod {
					// The rules record the container's own; the method raised it to cover its pod.
					if own := recorded[figure{s.Target, "limit"}]; !(s.Limit > own) {
						t.Errorf("%s raised to %v, not above its own %v", fmtTarget(s.Target), s.Limit, own)
					}
					seen[figure{s.Target, "limit"}] = true
					continue
				}
				check(s, "limit", s.Limit, suggested)
			}
			for f := range recorded {
				if !seen[f] {
					t.Errorf("the rules record %s %s, the method has none", fmtTarget(f.t), f.name)
				}
			}
			got := map[string]string{}
			for _, s := range ss {
				got[fmtTarget(s.Target)] = fmt.Sprintf("req %s lim %s peak %s hist %s pods %d %s", Format(s.Request), Format(s.Limit),
					Format(s.Peak), Hours(s.History), s.Pods, s.Insufficient)
				t.Logf("%s: %s", fmtTarget(s.Target), got[fmtTarget(s.Target)])
			}
			// What the data says, worked by hand.
			for target, want := range map[string]string{
				// 2048MiB spike + 30 % = 2662.4MiB: 2560Mi < it ≤ 3Gi.
				"shop/Deployment/cart volume cache": "req 0 lim 3Gi peak 2Gi hist 3d pods 2 ",
				// 512KiB a minute for the 2759 minutes after the recreation: 1379.5MiB, + 30 % =
				// 1793.35MiB, just above 1792Mi; the hour without a pod is no history.
				"shop/StatefulSet/db volume data": "req 0 lim 2Gi peak 1412608Ki hist 2d23h pods 2 ",
				// The spike of cart-a's volume counts toward its pod's limit, which is the sum
				// of its containers' (one): app's own 40-90MiB would have a limit of 128Mi.
				"shop/Deployment/cart container app":  "req 96Mi lim 3Gi",
				"ops/Job/backup-29412345 volume work": "req 0 lim 0 peak 500Mi hist 5h pods 1 only 5h of history, 1d needed",
				"ops/Pod/debug volume tmp":            "req 0 lim 16Mi peak 10Mi hist 3d pods 1 ",
			} {
				if !strings.HasPrefix(got[target], want) {
					t.Errorf("%s: %s, want %s...", target, got[target], want)
				}
			}
			if slices.ContainsFunc(ss, func(s Suggestion) bool { return s.Name == "shm" }) {
				t.Error("a memory volume got a suggestion")
			}
		})
	}
}

func fmtTarget(t Target) string {
	s := t.Namespace + "/" + t.WorkloadKind + "/" + t.Workload + " " + string(t.Kind)
	if t.Name != "" {
		s += " " + t.Name
	}
	return s
}
