package prombill

import (
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/emptydir-guard/emptydir-guard/exporter/part"
)

func TestPromConfig(t *testing.T) {
	jobs := []scrapeJob{
		{name: "emptydir-exporter", path: "/metrics", interval: 5 * time.Second},
		{name: "emptydir-exporter-slow", path: "/metrics", params: url.Values{"collect[]": {"storage"}}, interval: 1500 * time.Millisecond},
	}
	setup := promSetup{jobs: jobs, targets: []target{{"127.0.0.1:1001", "node-000"}, {"127.0.0.1:1002", "node-001"}},
		ruleFiles: []string{"/tmp/x/rules.yml"}, selfAddr: "127.0.0.1:9090"}
	out, err := promConfig(setup)
	if err != nil {
		t.Fatal(err)
	}
	var got promFile
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if got.Global.EvaluationInterval != "30s" || len(got.RuleFiles) != 1 || got.RuleFiles[0] != "/tmp/x/rules.yml" {
		t.Errorf("global %+v, rule files %v: want evaluation every 30s over the one rule file", got.Global, got.RuleFiles)
	}
	if len(got.ScrapeConfigs) != 3 {
		t.Fatalf("%d scrape configs, want the 2 jobs and Prometheus' own", len(got.ScrapeConfigs))
	}
	slow := got.ScrapeConfigs[1]
	if slow.JobName != "emptydir-exporter-slow" || slow.ScrapeInterval != "1500ms" || slow.ScrapeTimeout != "1500ms" ||
		!slow.HonorLabels || strings.Join(slow.Params["collect[]"], ",") != "storage" {
		t.Errorf("second job %+v", slow)
	}
	if n := len(slow.StaticConfigs); n != 2 || slow.StaticConfigs[1].Targets[0] != "127.0.0.1:1002" ||
		slow.StaticConfigs[1].Labels["kubernetes_node"] != "node-001" {
		t.Errorf("targets %+v: want one static config per node with its node label", slow.StaticConfigs)
	}
	if self := got.ScrapeConfigs[2]; self.JobName != selfJob || self.StaticConfigs[0].Targets[0] != "127.0.0.1:9090" || self.HonorLabels {
		t.Errorf("self job %+v", self)
	}
	if _, err := promConfig(promSetup{jobs: jobs, selfAddr: "127.0.0.1:9090"}); err == nil {
		t.Error("a configuration without targets: no error")
	}
}

// TestProfileRules: every profile's rules file is there and holds rule groups, each with a
// name and rules that record or alert on an expression (promtool, when there is one, checks
// them fully: TestPromConfigLoads).
func TestProfileRules(t *testing.T) {
	profiles, err := allProfiles()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]bool{}
	for _, p := range profiles {
		if p.rules == "" {
			t.Errorf("profile %s: no rules file", p.name)
			continue
		}
		files[p.rules] = true
		raw, err := os.ReadFile(p.rules)
		if err != nil {
			t.Errorf("profile %s: %v", p.name, err)
			continue
		}
		// Not rulefmt: it would bring github.com/prometheus/prometheus into this module, for a
		// shape check; promtool checks the rules fully (TestPromConfigLoads, make test-rules).
		var rf struct {
			Groups []struct {
				Name  string `json:"name"`
				Rules []struct {
					Record string `json:"record"`
					Alert  string `json:"alert"`
					Expr   string `json:"expr"`
				} `json:"rules"`
			} `json:"groups"`
		}
		if err := yaml.Unmarshal(raw, &rf); err != nil {
			t.Errorf("profile %s: %s: %v", p.name, p.rules, err)
			continue
		}
		if len(rf.Groups) == 0 {
			t.Errorf("profile %s: %s holds no rule group", p.name, p.rules)
		}
		for _, g := range rf.Groups {
			if g.Name == "" || len(g.Rules) == 0 {
				t.Errorf("profile %s: %s: group %q with %d rules", p.name, p.rules, g.Name, len(g.Rules))
			}
			for i, r := range g.Rules {
				if (r.Record == "") == (r.Alert == "") || strings.TrimSpace(r.Expr) == "" {
					t.Errorf("profile %s: %s: group %s, rule %d: want a record or an alert, and an expr", p.name, p.rules, g.Name, i)
				}
			}
		}
	}
	if !files[previousDefaults.rules] || !files[shippedRules] || len(files) != 2 {
		t.Errorf("rules files %v: want the reference's copy %s and the shipped %s", files, previousDefaults.rules, shippedRules)
	}
}

// TestPromConfigLoads has promtool check what Prometheus will load: each profile's jobs with
// its rules file (promtool check config checks the rule files it names).
func TestPromConfigLoads(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("no promtool (Debian's prometheus package)")
	}
	dir := t.TempDir()
	profiles, err := allProfiles()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range profiles {
		rules, err := filepath.Abs(p.rules)
		if err != nil {
			t.Fatal(err)
		}
		out, err := promConfig(promSetup{jobs: p.jobs, targets: []target{{"127.0.0.1:1001", "node-000"}},
			ruleFiles: []string{rules}, selfAddr: "127.0.0.1:9090"})
		if err != nil {
			t.Fatal(err)
		}
		cfg := filepath.Join(dir, "prometheus.yml")
		if err := os.WriteFile(cfg, out, 0o644); err != nil {
			t.Fatal(err)
		}
		msg, err := exec.Command(promtool, "check", "config", cfg).CombinedOutput()
		if err != nil {
			t.Errorf("profile %s, rules %s: promtool check config: %v\n%s", p.name, p.rules, err, msg)
		} else if !strings.Contains(string(msg), "SUCCESS") || !strings.Contains(string(msg), filepath.Base(rules)) {
			t.Errorf("profile %s: promtool check config did not check %s:\n%s", p.name, p.rules, msg)
		}
	}
}

func TestPodVolumes(t *testing.T) {
	p := podVolumes("node-007", 3, 0)
	var emptyDirs, limited int
	kinds := map[part.Kind]int{}
	for _, v := range p.Parts {
		kinds[v.Kind]++
		if v.Kind == part.KindEmptyDir {
			emptyDirs++
			if v.LimitBytes != nil {
				limited++
			}
		}
		if v.BudgetBytes == nil || *v.BudgetBytes != containerLimitGiB<<30 {
			t.Errorf("%s: budget %v, want the pod's limit", v.Name, v.BudgetBytes)
		}
	}
	if emptyDirs != 3 || limited != 1 || kinds[part.KindWritableLayer] != 1 || kinds[part.KindContainerLogs] != 1 || kinds[part.KindPodFiles] != 1 {
		t.Errorf("volumes %+v: want 3 emptyDirs (1 with a sizeLimit), a writable layer, logs and the pod's files", p.Parts)
	}
	if p.Storage == nil || len(p.Storage.Containers) != 1 || p.Storage.Containers[0].LimitBytes == nil {
		t.Errorf("storage %+v: want one container with its own limit", p.Storage)
	}
	restarted := podVolumes("node-007", 3, 1)
	if restarted.Pod != p.Pod || restarted.Namespace != p.Namespace || restarted.UID == p.UID ||
		restarted.Storage.Containers[0].ID == p.Storage.Containers[0].ID {
		t.Errorf("restart: %s/%s %s, was %s/%s %s: want the same name, a new UID and container", restarted.Namespace, restarted.Pod, restarted.UID, p.Namespace, p.Pod, p.UID)
	}
	if other := podVolumes("node-008", 3, 0); other.Pod == p.Pod || other.UID == p.UID {
		t.Errorf("two nodes' pod 3 share %s or %s", p.Pod, p.UID)
	}
}

// twoProfiles are measurements of two profiles at 50 and 100 nodes, with round numbers. Their
// rules differ: rec is only today's, h only lean's.
func twoProfiles() []profileResult {
	type eval struct {
		name     string
		interval time.Duration
		seconds  float64
	}
	groups := func(evals ...eval) []groupFigure {
		var out []groupFigure
		for _, e := range evals {
			out = append(out, groupFigure{name: e.name, interval: e.interval, evalSeconds: e.seconds})
		}
		return out
	}
	today := profileResult{name: "today",
		full: runFigures{nodes: 100, headSeries: 501_000, selfSeries: 1_000, exporterSeries: 4_000,
			appendedPerSecond: 100_200, selfPerSecond: 200, rssBytes: 3e9, cpuCores: 1.0,
			groups:   groups(eval{"g", 30 * time.Second, 0.30}, eval{"rec", 30 * time.Second, 0.20}),
			restarts: 300, seriesCreated: 12_000},
		half: runFigures{nodes: 50, headSeries: 251_000, selfSeries: 1_000, rssBytes: 2e9, cpuCores: 0.6,
			groups: groups(eval{"g", 30 * time.Second, 0.16}, eval{"rec", 30 * time.Second, 0.10})},
		exposition: exposition{rawBytes: 700 << 10, gzipBytes: 80 << 10, renderSeconds: 0.02}}
	lean := profileResult{name: "lean",
		full: runFigures{nodes: 100, headSeries: 151_000, selfSeries: 1_000, exporterSeries: 1_000,
			appendedPerSecond: 30_200, selfPerSecond: 200, rssBytes: 1.5e9, cpuCores: 0.5,
			groups: groups(eval{"g", 30 * time.Second, 0.10}, eval{"h", 2 * time.Second, 0.05})},
		half: runFigures{nodes: 50, headSeries: 76_000, selfSeries: 1_000, rssBytes: 1e9, cpuCores: 0.3,
			groups: groups(eval{"g", 30 * time.Second, 0.06}, eval{"h", 2 * time.Second, 0.03})}}
	return []profileResult{today, lean}
}

func TestBills(t *testing.T) {
	bs := bills(twoProfiles())
	today, lean := bs[0], bs[1]
	near := func(what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9*math.Max(1, math.Abs(want)) {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	near("today's head series per node", today.headSeries, 5_000)
	near("today's samples/s per node", today.samplesRate, 1_000)
	// The slope between 50 and 100 nodes: Prometheus' own 1 GB base left out.
	near("today's RSS per node", today.rss, 2e7)
	near("today's CPU per node", today.cpu, 0.008)
	near("today's group g per node", today.groups[0].perNode, 0.0028)
	near("today's group rec per node", today.groups[1].perNode, 0.002)
	near("today's evaluation at N", today.evalAtN, 0.5)
	near("today's series per restart", today.seriesPerRestart, 40)
	near("today's churn per hour", today.churnPerHour(), 40*podsPerNode/24.0)
	// Lean's slopes are its own runs', not today's scaled.
	near("lean's head series per node", lean.headSeries, 1_500)
	near("lean's RSS per node", lean.rss, 1e7)
	near("lean's CPU per node", lean.cpu, 0.004)
	near("lean's group g per node", lean.groups[0].perNode, 0.0008)
	near("lean's group h per node", lean.groups[1].perNode, 0.0004)
	if !math.IsNaN(lean.seriesPerRestart) {
		t.Errorf("lean: series per restart %v: want none measured", lean.seriesPerRestart)
	}

	// A group the run at N/2 did not see, or runs over as many nodes, have no slope.
	odd := twoProfiles()[:1]
	odd[0].half.groups = odd[0].half.groups[:1]
	if b := bills(odd)[0]; !math.IsNaN(b.groups[1].perNode) || math.IsNaN(b.groups[0].perNode) {
		t.Errorf("groups %+v: want group rec without a slope, g with one", b.groups)
	}
	odd[0].half.nodes = odd[0].full.nodes
	if b := bills(odd)[0]; !math.IsNaN(b.rss) {
		t.Errorf("RSS %v over two runs of 100 nodes: want no slope", b.rss)
	}
}

func TestRenderReport(t *testing.T) {
	out := renderReport(bills(twoProfiles()), runInfo{cpus: 2, prometheusVersion: "prometheus, version 2.42.0", nodes: 100, halfNodes: 50,
		warmUp: 90 * time.Second, window: 3 * time.Minute, churnRestarts: 3, churnPhase: 45 * time.Second})
	for _, want := range []string{
		"| Per node, and extrapolated | today | lean |",
		"| Head series per node (recording rules' output included) | 5,000 | 1,500 (× 0.30) |",
		"| Samples appended per second per node | 1,000/s | 300/s (× 0.30) |",
		"| **Head series, 1,000 nodes** | 5,000,000 | 1,500,000 (× 0.30) |",
		"| **Prometheus RSS, 1,000 nodes** | 18.6 GiB | 9.3 GiB (× 0.50) |",
		"| **Prometheus CPU, 1,000 nodes** | 8.00 cores | 4.00 cores (× 0.50) |",
		"| Series created per pod restart | 40 | – |",
		"| Rule evaluation at 100 nodes, every group added up (measured) | 500.0 ms | 150.0 ms (× 0.30) |",
		// Every group of either profile's rules, in the order first seen.
		"| Rule group `g` (every 30s), evaluation at 1,000 nodes | 2.80 s | 800.0 ms (× 0.29) |\n" +
			"| Rule group `rec` (every 30s), evaluation at 1,000 nodes | 2.00 s | – |\n" +
			"| Rule group `h` (every 2s), evaluation at 1,000 nodes | – | 400.0 ms |\n",
		"Measured on 2 CPUs with prometheus, version 2.42.0: 100 simulated nodes (110 pods each), warm-up 1m30s, window 3m0s; RSS, CPU and rule evaluation fitted over 50 and 100 nodes",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "scaled") {
		t.Errorf("a profile's slopes borrowed from another's:\n%s", out)
	}
	// A slope below 0 is noise, and has no ratio.
	noisy := twoProfiles()
	noisy[0].half.cpuCores = 1.2
	noisy[1].half.cpuCores = 0.6
	if out := renderReport(bills(noisy), runInfo{nodes: 100, halfNodes: 50}); !strings.Contains(out, "| Prometheus CPU per node | "+noGrowth+" | "+noGrowth+" |") {
		t.Errorf("a negative CPU slope:\n%s", out)
	}
	// A group whose interval differs between the profiles' rules names both.
	other := twoProfiles()
	other[1].full.groups[0].interval = time.Minute
	if out := renderReport(bills(other), runInfo{nodes: 100, halfNodes: 50}); !strings.Contains(out, "| Rule group `g` (every 30s / 1m0s),") {
		t.Errorf("group g every 30s and 1m:\n%s", out)
	}
	// Every row has a cell per profile.
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "|") && strings.Count(line, "|") != 4 {
			t.Errorf("row %q: want 3 cells", line)
		}
	}
}

func TestFormats(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{fmtCount(1_234_567), "1,234,567"},
		{fmtCount(-983), "−983"},
		{fmtCount(2.5), "2.5"},
		{fmtBytes(512), "512 B"},
		{fmtBytes(80 << 10), "80.0 KiB"},
		{fmtSeconds(0.0421), "42.1 ms"},
		{fmtSeconds(0.00005), "50 µs"},
		{fmtCores(0.0083), "0.83 % of a core"},
		{fmtCores(8.3), "8.30 cores"},
		{promDuration(5 * time.Second), "5s"},
		{promDuration(1500 * time.Millisecond), "1500ms"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
	if m := median([]float64{3, 1, 2, 10}); m != 2.5 {
		t.Errorf("median = %v, want 2.5", m)
	}
	if !math.IsNaN(median(nil)) {
		t.Error("median of nothing is no NaN")
	}
}

func TestSeriesByFamily(t *testing.T) {
	text := `# HELP a_total A.
# TYPE a_total counter
a_total{x="1"} 1
a_total{x="2"} 2
b 3

c{y="z"} 4
`
	got := seriesByFamily(text)
	want := []familyCount{{"a_total", 2}, {"b", 1}, {"c", 1}}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("got %v, want %v", got, want)
		}
	}
}

// TestShippedProfiles: the profiles read from the kustomize base are what the chart ships: two
// jobs, the trigger series every 5s and the rest under the -slow job, 30s by default and 60s
// with the large-cluster profile, which also denies the Go and process families.
func TestShippedProfiles(t *testing.T) {
	profiles, err := allProfiles()
	if err != nil {
		t.Fatal(err)
	}
	if len(profiles) != 3 {
		t.Fatalf("%d profiles, want the previous defaults, the defaults and the large-cluster profile", len(profiles))
	}
	for i, slow := range map[int]time.Duration{1: 30 * time.Second, 2: 60 * time.Second} {
		p := profiles[i]
		if len(p.jobs) != 2 {
			t.Fatalf("%s: jobs %+v, want two", p.name, p.jobs)
		}
		fast, rest := p.jobs[0], p.jobs[1]
		if fast.name != "emptydir-exporter" || fast.params.Get("collect[]") != "trigger" || fast.interval != 5*time.Second {
			t.Errorf("%s: first job %+v, want emptydir-exporter collect[]=trigger every 5s", p.name, fast)
		}
		if rest.name != "emptydir-exporter-slow" || rest.params.Get("exclude[]") != "trigger" || rest.interval != slow {
			t.Errorf("%s: second job %+v, want emptydir-exporter-slow exclude[]=trigger every %v", p.name, rest, slow)
		}
	}
}

// TestNodesServeGzip: one node of every profile answers each job's scrape on its listener, as
// Prometheus asks for it, gzip-compressed (promhttp's default), so that the bench process
// compresses what it renders and the listeners carry the compressed size.
func TestNodesServeGzip(t *testing.T) {
	profiles, err := allProfiles()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range profiles {
		fl, err := startFleet(1, p)
		t.Cleanup(fl.stop)
		if err != nil {
			t.Fatalf("profile %s: %v", p.name, err)
		}
		for _, j := range p.jobs {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+fl.nodes[0].addr+j.requestURI(), nil)
			if err != nil {
				t.Fatal(err)
			}
			// Set by hand, the transport leaves the body compressed.
			req.Header.Set("Accept-Encoding", "gzip")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("profile %s, job %s: %v", p.name, j.name, err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Encoding") != "gzip" {
				t.Errorf("profile %s, job %s: HTTP %d, Content-Encoding %q: want 200, gzip: %.200s",
					p.name, j.name, resp.StatusCode, resp.Header.Get("Content-Encoding"), body)
			}
		}
		fl.stop()
	}
}
