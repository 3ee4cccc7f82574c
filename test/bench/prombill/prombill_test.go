package prombill

import (
	"compress/gzip"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/emptydir-guard/emptydir-guard/internal/docsection"
)

// The benchmark's knobs, as go test flags: go test ... ./prombill/ -args -prombill.nodes=200.
var (
	nodesFlag      = flag.Int("prombill.nodes", 100, "simulated nodes scraped by Prometheus")
	warmUpFlag     = flag.Duration("prombill.warm-up", 90*time.Second, "how long Prometheus runs before its window")
	windowFlag     = flag.Duration("prombill.window", 3*time.Minute, "the measurement window of each Prometheus run")
	churnFlag      = flag.Duration("prombill.churn", 45*time.Second, "how long the churn phase restarts pods, after the window")
	restartsFlag   = flag.Int("prombill.restarts", 3, "pods each node restarts during the churn phase")
	prometheusFlag = flag.String("prombill.prometheus", "/usr/bin/prometheus", "the Prometheus binary")
	writeDocFlag   = flag.Bool("prombill.write-doc", true, "write the table into docs/performance.md")
)

// docPath is the document the table goes into, from this package's directory.
var docPath = filepath.Join(repoRoot, "docs", "performance.md")

// rulePolls is how often the window reads the rule groups' last evaluation times.
const rulePolls = 5 * time.Second

// minUpShare is the share of the window's scrapes that must succeed for a run to count.
const minUpShare = 0.99

// BenchmarkPrometheusBill runs every profile's nodes under a real Prometheus with the
// profile's rules, at N/2 and at N nodes, and writes what a Prometheus pays per node into
// docs/performance.md, section prometheus-bill:
//
//	cd test/bench && go test -run '^$' -bench '^BenchmarkPrometheusBill$' -benchtime=1x -timeout 90m ./prombill/
func BenchmarkPrometheusBill(b *testing.B) {
	version, err := prometheusVersion(*prometheusFlag)
	if err != nil {
		b.Fatalf("make bench-prometheus needs a Prometheus binary (Debian's prometheus package): %v", err)
	}
	n := *nodesFlag
	if n < 2 {
		b.Fatalf("-prombill.nodes=%d: want at least 2", n)
	}
	info := runInfo{cpus: runtime.NumCPU(), prometheusVersion: version, nodes: n, halfNodes: n / 2,
		warmUp: *warmUpFlag, window: *windowFlag, churnRestarts: *restartsFlag, churnPhase: *churnFlag}
	profiles, err := allProfiles()
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		var results []profileResult
		for _, p := range profiles {
			start := time.Now()
			r, err := measureProfile(b, p, n)
			if err != nil {
				b.Fatalf("profile %s: %v", p.name, err)
			}
			b.Logf("profile %s measured in %v", p.name, time.Since(start).Round(time.Second))
			results = append(results, r)
		}
		bs := bills(results)
		body := renderReport(bs, info)
		b.Log("\n" + body)
		today := bs[0]
		b.ReportMetric(today.headSeries, "head-series/node")
		b.ReportMetric(today.samplesRate, "samples/s/node")
		b.ReportMetric(today.rss, "rss-B/node")
		b.ReportMetric(today.churnPerHour(), "churn-series/h/node")
		for _, other := range bs[1:] {
			b.ReportMetric(other.headSeries/today.headSeries, slug(other.name)+"/today-series")
			b.ReportMetric(other.samplesRate/today.samplesRate, slug(other.name)+"/today-samples")
		}
		if *writeDocFlag {
			if err := docsection.Replace(docPath, "prometheus-bill", "make bench-prometheus", body); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// slug is name as a metric unit: no spaces.
func slug(name string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, name)
}

// measureProfile starts n nodes of p and measures them under Prometheus: at n/2 nodes first,
// then at n with the churn phase; then each node's exposition.
func measureProfile(b *testing.B, p profile, n int) (profileResult, error) {
	r := profileResult{name: p.name}
	var err error
	// A fleet of its own: nodes nobody scrapes would still take CPU from Prometheus.
	r.half, err = withFleet(b, p, n/2, func(fl *fleet) (runFigures, error) { return runPrometheus(b, p, fl, n/2, false) })
	if err != nil {
		return r, fmt.Errorf("at %d nodes: %w", n/2, err)
	}
	fl, err := startFleet(n, p)
	b.Cleanup(fl.stop)
	defer fl.stop()
	if err != nil {
		return r, err
	}
	if r.full, err = runPrometheus(b, p, fl, n, true); err != nil {
		return r, fmt.Errorf("at %d nodes: %w", n, err)
	}
	// After Prometheus has gone: the scrapes timed here compete with no Prometheus for the CPUs.
	r.exposition, err = measureExposition(fl, p, b.Logf)
	return r, err
}

// withFleet runs measure over n nodes of p, stopped when it returns.
func withFleet(b *testing.B, p profile, n int, measure func(*fleet) (runFigures, error)) (runFigures, error) {
	fl, err := startFleet(n, p)
	b.Cleanup(fl.stop)
	defer fl.stop()
	if err != nil {
		return runFigures{}, err
	}
	return measure(fl)
}

// runPrometheus runs one Prometheus over the first n nodes of fl: warm-up, window, and with
// churn the churn phase.
func runPrometheus(b *testing.B, p profile, fl *fleet, n int, churn bool) (runFigures, error) {
	ctx := context.Background()
	fig := runFigures{nodes: n}
	addr, err := freeLoopbackAddr()
	if err != nil {
		return fig, err
	}
	config := func(ruleFile string) ([]byte, error) {
		return promConfig(promSetup{jobs: p.jobs, targets: fl.targets(n), ruleFiles: []string{ruleFile}, selfAddr: addr})
	}
	srv, err := startPrometheus(*prometheusFlag, addr, config, p.rules)
	if srv != nil {
		b.Cleanup(srv.stop)
		defer srv.stop()
	}
	if err != nil {
		return fig, err
	}
	if err := srv.waitReady(2 * time.Minute); err != nil {
		return fig, err
	}
	b.Logf("%s, %d nodes: Prometheus ready at %s; warm-up %v, window %v", p.name, n, srv.base, *warmUpFlag, *windowFlag)
	if err := sleepWhileRunning(srv, *warmUpFlag); err != nil {
		return fig, err
	}
	windowStart := time.Now()
	evals, err := pollRuleGroups(ctx, srv, windowStart.Add(*windowFlag))
	if err != nil {
		return fig, err
	}
	windowEnd := time.Now()
	fig.groups = evals
	if err := readWindow(ctx, srv, p, n, windowStart, windowEnd, &fig, b.Logf); err != nil {
		return fig, err
	}
	if churn {
		if err := churnPhase(ctx, srv, p, fl, n, windowStart, windowEnd, &fig, b.Logf); err != nil {
			return fig, err
		}
	}
	return fig, nil
}

// sleepWhileRunning waits d, failing early if Prometheus exits.
func sleepWhileRunning(srv *promServer, d time.Duration) error {
	select {
	case <-srv.done:
		return fmt.Errorf("prometheus exited: %s", srv.logTail())
	case <-time.After(d):
		return nil
	}
}

// pollRuleGroups reads the rule groups until end and gives each group's median evaluation
// time over the evaluations seen (each counted once).
func pollRuleGroups(ctx context.Context, srv *promServer, end time.Time) ([]groupFigure, error) {
	seen := map[string]time.Time{}
	evals := map[string][]float64{}
	var order []groupFigure
	for {
		groups, err := srv.ruleGroups(ctx)
		if err != nil {
			return nil, err
		}
		for _, g := range groups {
			if _, known := evals[g.Name]; !known {
				order = append(order, groupFigure{name: g.Name, interval: time.Duration(g.Interval * float64(time.Second))})
				evals[g.Name] = nil
			}
			if !g.LastEvaluation.IsZero() && !g.LastEvaluation.Equal(seen[g.Name]) {
				seen[g.Name] = g.LastEvaluation
				evals[g.Name] = append(evals[g.Name], g.EvaluationTime)
			}
		}
		wait := min(rulePolls, time.Until(end))
		if wait <= 0 {
			break
		}
		if err := sleepWhileRunning(srv, wait); err != nil {
			return nil, err
		}
	}
	for i := range order {
		order[i].evalSeconds = median(evals[order[i].name])
	}
	return order, nil
}

// readWindow reads the window's figures from Prometheus' own metrics.
func readWindow(ctx context.Context, srv *promServer, p profile, n int, start, end time.Time, fig *runFigures, logf func(string, ...any)) error {
	window := fmt.Sprintf("[%ds]", int(end.Sub(start).Seconds()))
	self := fmt.Sprintf(`{job=%q}`, selfJob)
	q := func(expr string) (float64, error) { return srv.query(ctx, expr, end) }
	for _, j := range p.jobs {
		job := fmt.Sprintf(`{job=%q}`, j.name)
		// A failed scrape appends stale markers instead of samples: the figures hold only if
		// (nearly) every scrape of the window succeeded.
		up, err := q("avg(avg_over_time(up" + job + window + "))")
		if err != nil {
			return err
		}
		if up < minUpShare {
			why, err := srv.targetErrors(ctx)
			if err != nil {
				why = map[string]int{"(reading the targets: " + err.Error() + ")": 0}
			}
			return fmt.Errorf("job %s: %.1f %% of the window's scrapes succeeded (failing now: %v): the machine cannot hold %d nodes",
				j.name, up*100, why, n)
		}
		logf("job %s: %.2f %% of the window's scrapes succeeded", j.name, up*100)
		series, err := q("avg(scrape_samples_post_metric_relabeling" + job + ")")
		if err != nil {
			return err
		}
		scrape, err := q("avg(avg_over_time(scrape_duration_seconds" + job + window + "))")
		if err != nil {
			return err
		}
		fig.exporterSeries += series
		fig.scrapeSeconds += scrape
	}
	var selfSeries float64
	for _, read := range []struct {
		expr string
		into *float64
	}{
		{"prometheus_tsdb_head_series", &fig.headSeries},
		{"scrape_samples_post_metric_relabeling" + self, &selfSeries},
		{"sum(rate(prometheus_tsdb_head_samples_appended_total" + window + "))", &fig.appendedPerSecond},
		{"avg_over_time(process_resident_memory_bytes" + self + window + ")", &fig.rssBytes},
		{"rate(process_cpu_seconds_total" + self + window + ")", &fig.cpuCores},
	} {
		v, err := q(read.expr)
		if err != nil {
			return err
		}
		*read.into = v
	}
	fig.selfSeries = selfSeries
	fig.selfPerSecond = selfSeries / selfScrapeInterval.Seconds()
	// An alert pending or firing would add series and rule work no quiet node causes.
	alerts, err := srv.queryAll(ctx, "count by (alertname, alertstate) (ALERTS)", end)
	if err != nil {
		return err
	}
	for _, a := range alerts {
		logf("alert %s %s on %v series at the window's end", a.labels["alertname"], a.labels["alertstate"], a.value)
	}
	return nil
}

// churnPhase restarts *restartsFlag pods on each of the first n nodes, spread over
// *churnFlag, and counts the series Prometheus created for them: the head's created counter
// from before the first restart until every restarted pod has been scraped and ruled, less
// what the window created without restarts over as long.
func churnPhase(ctx context.Context, srv *promServer, p profile, fl *fleet, n int, windowStart, windowEnd time.Time, fig *runFigures, logf func(string, ...any)) error {
	const created = "prometheus_tsdb_head_series_created_total"
	steadyStart, err := srv.query(ctx, created, windowStart)
	if err != nil {
		return err
	}
	steadyEnd, err := srv.query(ctx, created, windowEnd)
	if err != nil {
		return err
	}
	steadyRate := (steadyEnd - steadyStart) / windowEnd.Sub(windowStart).Seconds()
	logf("series created in the window without restarts: %.0f (%.2f/s)", steadyEnd-steadyStart, steadyRate)
	// Read after one self-scrape more than the window's end, so that no earlier creation counts.
	if err := sleepWhileRunning(srv, selfScrapeInterval+time.Second); err != nil {
		return err
	}
	from := time.Now()
	before, err := srv.query(ctx, created, from)
	if err != nil {
		return err
	}
	restarts := *restartsFlag
	if restarts > 0 {
		step := *churnFlag / time.Duration(restarts)
		for k := range restarts {
			for _, node := range fl.nodes[:n] {
				// Pods far apart, a different one each round.
				node.restartPod((k*37 + 11) % podsPerNode)
			}
			if err := sleepWhileRunning(srv, step); err != nil {
				return err
			}
		}
	}
	// Every restarted pod scraped by every job and every rule group evaluated over it.
	settle := evaluationInterval
	for _, j := range p.jobs {
		settle = max(settle, 2*j.interval)
	}
	if err := sleepWhileRunning(srv, settle+selfScrapeInterval+time.Second); err != nil {
		return err
	}
	to := time.Now()
	after, err := srv.query(ctx, created, to)
	if err != nil {
		return err
	}
	fig.restarts = restarts * n
	fig.seriesCreated = after - before - steadyRate*to.Sub(from).Seconds()
	logf("churn: %d restarts created %.0f series (%.0f before the steady rate is taken out)", fig.restarts, fig.seriesCreated, after-before)
	return nil
}

// measureExposition GETs every job's URL of every node in-process, as Prometheus asks for it
// (gzip) and uncompressed: sizes and render time, median over the nodes, jobs added up.
func measureExposition(fl *fleet, p profile, logf func(string, ...any)) (exposition, error) {
	var out exposition
	for _, j := range p.jobs {
		var raw, gz, render []float64
		for i, node := range fl.nodes {
			body, _, err := get(node.handler, j.requestURI(), false)
			if err != nil {
				return out, fmt.Errorf("%s %s: %w", node.name, j.name, err)
			}
			if i == 0 {
				logf("%s, job %s: series by family on one node: %v", p.name, j.name, seriesByFamily(body))
			}
			size := len(body)
			zbody, took, err := get(node.handler, j.requestURI(), true)
			zsize := len(zbody)
			if err != nil {
				return out, fmt.Errorf("%s %s: %w", node.name, j.name, err)
			}
			raw, gz, render = append(raw, float64(size)), append(gz, float64(zsize)), append(render, took.Seconds())
		}
		out.rawBytes += median(raw)
		out.gzipBytes += median(gz)
		out.renderSeconds += median(render)
	}
	return out, nil
}

// get serves one request of uri by h and gives the body and how long h took.
func get(h http.Handler, uri string, compressed bool) (string, time.Duration, error) {
	req := httptest.NewRequest(http.MethodGet, uri, nil)
	if compressed {
		req.Header.Set("Accept-Encoding", "gzip")
	}
	rec := httptest.NewRecorder()
	start := time.Now()
	h.ServeHTTP(rec, req)
	took := time.Since(start)
	if rec.Code != http.StatusOK {
		return "", 0, fmt.Errorf("%s answered %d: %.200s", uri, rec.Code, rec.Body)
	}
	body := rec.Body.String()
	if compressed {
		// Check it is what Prometheus gets: a gzip body that decompresses.
		zr, err := gzip.NewReader(strings.NewReader(body))
		if err != nil {
			return "", 0, fmt.Errorf("%s: no gzip body: %w", uri, err)
		}
		if _, err := io.Copy(io.Discard, zr); err != nil {
			return "", 0, fmt.Errorf("%s: %w", uri, err)
		}
	}
	return body, took, nil
}
