package recommend

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"
)

// recommendationRules is the group of rules/emptydir-guard.rules.yml that records
// recommendations: its interval and each recorded series' expression.
func recommendationRules(t *testing.T) (time.Duration, map[string]string) {
	t.Helper()
	b, err := os.ReadFile("../../rules/emptydir-guard.rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Name     string
			Interval string
			Rules    []struct{ Record, Alert, Expr string }
		}
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	for _, g := range f.Groups {
		if g.Name != "emptydir-guard.recommendations" {
			continue
		}
		interval, err := model.ParseDuration(g.Interval)
		if err != nil {
			t.Fatal(err)
		}
		records := map[string]string{}
		for _, r := range g.Rules {
			if r.Record != "" {
				records[r.Record] = r.Expr
			}
		}
		return time.Duration(interval), records
	}
	t.Fatal("no group emptydir-guard.recommendations")
	return 0, nil
}

// compact drops all whitespace: the rules spread an expression over lines.
func compact(s string) string { return strings.Join(strings.Fields(s), "") }

// TestRulesRecordStepExprs: the rules record exactly the points the CLI computes without them,
// every Step.
func TestRulesRecordStepExprs(t *testing.T) {
	interval, records := recommendationRules(t)
	if interval != Step {
		t.Errorf("the group's interval is %s, the step %s", interval, Step)
	}
	current := map[Kind]string{
		KindVolume:    "namespace_workload_volume:emptydir_limit_bytes:max",
		KindContainer: "namespace_workload_container:emptydir_container_ephemeral_storage_limit_bytes:max",
		KindPod:       "namespace_workload:emptydir_pod_ephemeral_storage_limit_bytes:max",
	}
	for k, s := range kinds {
		if got := records[s.step]; compact(got) != compact(StepExpr(k)) {
			t.Errorf("%s records\n%s\nthe method computes\n%s", s.step, got, StepExpr(k))
		}
		if got := records[current[k]]; compact(got) != compact(CurrentExpr(k)) {
			t.Errorf("%s records\n%s\nthe method reads\n%s", current[k], got, CurrentExpr(k))
		}
	}
}

// TestRulesUseDefaults: the suggestions the rules record are DefaultConfig's, rounded by
// RoundExpr.
func TestRulesUseDefaults(t *testing.T) {
	_, records := recommendationRules(t)
	c := DefaultConfig()
	window := "[" + strconv.Itoa(int(c.Window.Hours()/24)) + "d]"
	levels := map[Kind]string{KindVolume: "namespace_workload_volume", KindContainer: "namespace_workload_container", KindPod: "namespace_workload"}
	for k, s := range kinds {
		base := strings.TrimSuffix(s.step, ":max5m")
		peak, quantile := base+":max7d", base+":quantile95_7d"
		history := levels[k] + ":emptydir_" + string(k) + "_recommendation_history_seconds:7d"
		want := map[string]string{
			peak:     "max_over_time(" + s.step + window + ")",
			quantile: "quantile_over_time(" + strconv.FormatFloat(c.Quantile, 'g', -1, 64) + ", " + s.step + window + ")",
			history:  "count_over_time(" + s.step + window + ") * " + strconv.Itoa(int(Step.Seconds())),
		}
		enough := " and on (" + s.by() + ") " + history + " >= " + strconv.Itoa(int(c.MinHistory.Seconds()))
		limit := RoundExpr(peak+" * "+strconv.FormatFloat(1+c.Headroom, 'g', -1, 64)) + enough
		switch k {
		case KindVolume:
			want[levels[k]+":emptydir_size_limit_bytes:suggested"] = limit
		default:
			want[levels[k]+":"+s.limit+":suggested"] = limit
			want[levels[k]+":"+strings.Replace(s.limit, "_limit_", "_request_", 1)+":suggested"] = RoundExpr(quantile) + enough
		}
		for name, expr := range want {
			if got, ok := records[name]; !ok || compact(got) != compact(expr) {
				t.Errorf("%s records\n%s\nwant\n%s", name, got, expr)
			}
		}
	}
}
