package main

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestShippedProfilesHideNothingShipped: the chart's values files (the defaults and the
// large-cluster profile) deny or leave out no family a shipped rule or dashboard reads, so
// that rules and dashboards work with every profile shipped. The lists are the exporter's
// --metric-allowlist and --metric-denylist: names and regular expressions matching a whole name.
func TestShippedProfilesHideNothingShipped(t *testing.T) {
	read := map[string]string{} // metric → where it is read
	for _, q := range dashboardQueries(t) {
		expr := q.Expr
		if q.Variable {
			if m := labelValues.FindStringSubmatch(expr); m != nil {
				expr = m[1]
			}
		}
		if parsed, err := promql.ParseExpr(substitute(expr)); err == nil {
			for _, n := range metricNames(parsed) {
				read[n] = q.Dashboard + " / " + q.Panel
			}
		}
	}
	for _, rf := range readRules(t) {
		for _, g := range rf.file.Groups {
			for _, r := range g.Rules {
				if parsed, err := promql.ParseExpr(r.Expr); err == nil {
					for _, n := range metricNames(parsed) {
						read[n] = "rule " + r.Alert + r.Record
					}
				}
			}
		}
	}
	if len(read) < 20 {
		t.Fatalf("only %d metrics read by rules and dashboards", len(read))
	}
	paths, _ := filepath.Glob(filepath.Join(repoRoot, "deploy/helm/emptydir-guard/values*.yaml"))
	if len(paths) < 2 {
		t.Fatalf("want values.yaml and values-large-cluster.yaml, found %v", paths)
	}
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var values struct {
			Exporter struct {
				MetricAllowlist []string `json:"metricAllowlist"`
				MetricDenylist  []string `json:"metricDenylist"`
			} `json:"exporter"`
		}
		if err := yaml.Unmarshal(raw, &values); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		whole := func(list []string) []*regexp.Regexp {
			var out []*regexp.Regexp
			for _, e := range list {
				out = append(out, regexp.MustCompile(`^(?:`+e+`)$`))
			}
			return out
		}
		deny, allow := whole(values.Exporter.MetricDenylist), whole(values.Exporter.MetricAllowlist)
		for name, where := range read {
			if !regexp.MustCompile(`^emptydir_|^go_|^process_`).MatchString(name) || regexp.MustCompile(`^emptydir_remediator_`).MatchString(name) {
				continue // not the exporter's: recording rules, up, ALERTS, the remediator's
			}
			for _, re := range deny {
				if re.MatchString(name) {
					t.Errorf("%s: exporter.metricDenylist %q hides %s, which %s reads", filepath.Base(p), re, name, where)
				}
			}
			allowed := len(allow) == 0
			for _, re := range allow {
				allowed = allowed || re.MatchString(name)
			}
			if !allowed {
				t.Errorf("%s: exporter.metricAllowlist leaves out %s, which %s reads", filepath.Base(p), name, where)
			}
		}
	}
}
