// Package dashboards reads the PromQL queries of the committed Grafana dashboards
// (dashboards/*.json), for the tests that check them: dashboards/generator parses them against
// the published metrics, test/e2e runs them against a live Prometheus.
package dashboards

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Query is one query of a dashboard: a panel target (panels nested in rows included) or a
// query variable.
type Query struct {
	Dashboard string // file name, e.g. "emptydir-guard-pod.json"
	Panel     string // the panel's title, or "variable <name>"
	// Description is the panel's description (none for a variable).
	Description string
	Expr        string
	// Variable marks a query variable (label_values(...)), which is no PromQL expression.
	Variable bool
}

// Dashboard is the part of a Grafana dashboard the tests read.
type Dashboard struct {
	UID        string  `json:"uid"`
	Panels     []Panel `json:"panels"`
	Templating struct {
		List []Variable `json:"list"`
	} `json:"templating"`
}

// Variable is a dashboard variable; Query is a string for type "query".
type Variable struct {
	Type  string `json:"type"`
	Name  string `json:"name"`
	Query any    `json:"query"`
}

// Panel is the part of a Grafana panel the tests read.
type Panel struct {
	Type        string  `json:"type"`
	Title       string  `json:"title"`
	Description string  `json:"description"`
	Panels      []Panel `json:"panels"`
	Targets     []struct {
		RefID      string `json:"refId"`
		Expr       string `json:"expr"`
		Instant    bool   `json:"instant"`
		Datasource struct {
			Type string `json:"type"`
			UID  string `json:"uid"`
		} `json:"datasource"`
	} `json:"targets"`
}

// Queries returns every query of the dashboards in dir (*.json), in file order.
func Queries(dir string) ([]Query, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("no dashboards (*.json) in %s", dir)
	}
	var out []Query
	for _, p := range paths {
		qs, err := fileQueries(p)
		if err != nil {
			return nil, err
		}
		out = append(out, qs...)
	}
	return out, nil
}

func fileQueries(path string) ([]Query, error) {
	var d Dashboard
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	name := filepath.Base(path)
	var out []Query
	var walk func([]Panel)
	walk = func(ps []Panel) {
		for _, pn := range ps {
			for _, tg := range pn.Targets {
				out = append(out, Query{Dashboard: name, Panel: pn.Title, Description: pn.Description, Expr: tg.Expr})
			}
			walk(pn.Panels)
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, ok := v.Query.(string)
		if !ok {
			return nil, fmt.Errorf("%s: variable %s: query is not a string: %v", name, v.Name, v.Query)
		}
		out = append(out, Query{Dashboard: name, Panel: "variable " + v.Name, Expr: q, Variable: true})
	}
	return out, nil
}

// Substitute replaces Grafana's interval variables with fixed durations ($__rate_interval 5m,
// $__interval 1m, $__range 3h) and the dashboards' own variables named in vars with their
// values, so that a query becomes PromQL. Other variables stay as they are.
func Substitute(expr string, vars map[string]string) string {
	r := []string{"${__rate_interval}", "5m", "$__rate_interval", "5m", "${__interval}", "1m", "$__interval", "1m",
		"${__range}", "3h", "$__range", "3h"}
	for k, v := range vars {
		r = append(r, "${"+k+"}", v, "$"+k, v)
	}
	return strings.NewReplacer(r...).Replace(expr)
}
