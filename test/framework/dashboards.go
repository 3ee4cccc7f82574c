package framework

import "github.com/emptydir-guard/emptydir-guard/internal/dashboards"

// DashboardExprs returns every panel target expression of dashboards/*.json (panels in rows
// included; not the query variables, which are no PromQL).
func DashboardExprs(t TB) []dashboards.Query {
	t.Helper()
	qs, err := dashboards.Queries(RepoPath("dashboards"))
	if err != nil {
		t.Fatal(err)
	}
	var out []dashboards.Query
	for _, q := range qs {
		if !q.Variable && q.Expr != "" {
			out = append(out, q)
		}
	}
	return out
}
