package prombill

import (
	"encoding/json"
	"math"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/emptydir-guard/emptydir-guard/exporter"
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

// TestPromConfigLoads has promtool check what Prometheus will load: the profiles' jobs with
// the shipped rules.
func TestPromConfigLoads(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("no promtool (Debian's prometheus package)")
	}
	dir := t.TempDir()
	rules, err := os.ReadFile(rulesPath)
	if err != nil {
		t.Fatal(err)
	}
	ruleFile := filepath.Join(dir, "rules.yml")
	if err := os.WriteFile(ruleFile, rules, 0o644); err != nil {
		t.Fatal(err)
	}
	profiles, err := allProfiles()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range profiles {
		out, err := promConfig(promSetup{jobs: p.jobs, targets: []target{{"127.0.0.1:1001", "node-000"}},
			ruleFiles: []string{ruleFile}, selfAddr: "127.0.0.1:9090"})
		if err != nil {
			t.Fatal(err)
		}
		cfg := filepath.Join(dir, "prometheus.yml")
		if err := os.WriteFile(cfg, out, 0o644); err != nil {
			t.Fatal(err)
		}
		if msg, err := exec.Command(promtool, "check", "config", cfg).CombinedOutput(); err != nil {
			t.Errorf("profile %s: promtool check config: %v\n%s", p.name, err, msg)
		}
	}
}

func TestPodVolumes(t *testing.T) {
	p := podVolumes("node-007", 3, 0)
	var emptyDirs, limited int
	kinds := map[exporter.Kind]int{}
	for _, v := range p.Volumes {
		kinds[v.Kind]++
		if v.Kind == exporter.KindEmptyDir {
			emptyDirs++
			if v.LimitBytes != nil {
				limited++
			}
		}
		if v.BudgetBytes == nil || *v.BudgetBytes != containerLimitGiB<<30 {
			t.Errorf("%s: budget %v, want the pod's limit", v.Name, v.BudgetBytes)
		}
	}
	if emptyDirs != 3 || limited != 1 || kinds[exporter.KindWritableLayer] != 1 || kinds[exporter.KindContainerLogs] != 1 || kinds[exporter.KindPodFiles] != 1 {
		t.Errorf("volumes %+v: want 3 emptyDirs (1 with a sizeLimit), a writable layer, logs and the pod's files", p.Volumes)
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

// twoProfiles are measurements of a fitted first profile and a second one at N only,
// with round numbers.
func twoProfiles() []profileResult {
	groups := func(eval float64) []groupFigure {
		return []groupFigure{{name: "g", interval: 30 * time.Second, evalSeconds: eval}}
	}
	today := profileResult{name: "today",
		full: runFigures{nodes: 100, headSeries: 501_000, selfSeries: 1_000, exporterSeries: 4_000,
			appendedPerSecond: 100_200, selfPerSecond: 200, rssBytes: 3e9, cpuCores: 1.0, groups: groups(0.30),
			restarts: 300, seriesCreated: 12_000},
		half:       &runFigures{nodes: 50, headSeries: 251_000, selfSeries: 1_000, rssBytes: 2e9, cpuCores: 0.6, groups: groups(0.16)},
		exposition: exposition{rawBytes: 700 << 10, gzipBytes: 80 << 10, renderSeconds: 0.02}}
	lean := profileResult{name: "lean",
		full: runFigures{nodes: 100, headSeries: 151_000, selfSeries: 1_000, exporterSeries: 1_000,
			appendedPerSecond: 30_200, selfPerSecond: 200, rssBytes: 1.5e9, cpuCores: 0.5, groups: groups(0.1)}}
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
	near("today's RSS per node", today.rss.value, 2e7)
	near("today's CPU per node", today.cpu.value, 0.008)
	near("today's group per node", today.groups[0].perNode.value, 0.0028)
	near("today's series per restart", today.seriesPerRestart, 40)
	near("today's churn per hour", today.churnPerHour(), 40*podsPerNode/24.0)
	if today.rss.method != fitted {
		t.Errorf("today's RSS: method %v, want fitted", today.rss.method)
	}
	// Lean has no run at 50 nodes: today's slopes × 1,500/5,000 head series.
	near("lean's head series per node", lean.headSeries, 1_500)
	near("lean's RSS per node", lean.rss.value, 2e7*0.3)
	near("lean's group per node", lean.groups[0].perNode.value, 0.0028*0.3)
	if lean.rss.method != scaledBySeries || !math.IsNaN(lean.seriesPerRestart) {
		t.Errorf("lean: RSS method %v, series per restart %v: want scaled by series, and none measured", lean.rss.method, lean.seriesPerRestart)
	}

	// Without a fit for the first profile, the figure at N over N.
	unfitted := twoProfiles()[:1]
	unfitted[0].half = nil
	if b := bills(unfitted)[0]; b.rss.method != wholeOverN || b.rss.value != 3e7 {
		t.Errorf("unfitted RSS %+v: want 3 GB / 100 nodes, whole over N", b.rss)
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
		"| **Prometheus RSS, 1,000 nodes** | 18.6 GiB | 5.6 GiB (× 0.30) |",
		"| Series created per pod restart | 40 | – |",
		"| Rule group `g` (every 30s), evaluation at 1,000 nodes | 2.80 s | 840.0 ms (× 0.30) |",
		"Measured on 2 CPUs with prometheus, version 2.42.0: 100 simulated nodes (110 pods each), warm-up 1m30s, window 3m0s; RSS, CPU and rule evaluation fitted over 50 and 100 nodes",
		"lean: RSS, CPU and rule evaluation are today's slopes scaled by head series.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	// A slope below 0 is noise, and has no ratio.
	noisy := twoProfiles()
	noisy[0].half.cpuCores = 1.2
	if out := renderReport(bills(noisy), runInfo{nodes: 100}); !strings.Contains(out, "| Prometheus CPU per node | "+noGrowth+" | "+noGrowth+" |") {
		t.Errorf("a negative CPU slope:\n%s", out)
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
