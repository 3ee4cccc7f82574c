package framework

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
)

// DashboardExprs returns every panel target expression of dashboards/*.json (rows included).
func DashboardExprs(t TB) []DashQuery {
	t.Helper()
	paths, _ := filepath.Glob(RepoPath("dashboards/*.json"))
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
	var out []DashQuery
	var walk func(dash string, raws []json.RawMessage)
	walk = func(dash string, raws []json.RawMessage) {
		for _, raw := range raws {
			var p panel
			if err := json.Unmarshal(raw, &p); err != nil {
				t.Fatalf("%s: %v", dash, err)
			}
			for _, tg := range p.Targets {
				if tg.Expr != "" {
					out = append(out, DashQuery{dash, p.Title, tg.Expr})
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

type DashQuery struct{ Dashboard, Panel, Expr string }

// SubstituteGrafana replaces Grafana's variables as dashboards/generator's tests do (same
// durations), with real values for the dashboards' own variables.
func SubstituteGrafana(expr string, vars map[string]string) string {
	r := []string{"${__rate_interval}", "5m", "$__rate_interval", "5m", "${__interval}", "1m", "$__interval", "1m",
		"${__range}", "3h", "$__range", "3h"}
	for k, v := range vars {
		r = append(r, "${"+k+"}", v, "$"+k, v)
	}
	return strings.NewReplacer(r...).Replace(expr)
}
