package dashboards

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func writeDashboard(t *testing.T, dir, name, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestQueriesReadsTargetsInRowsAndQueryVariables(t *testing.T) {
	dir := t.TempDir()
	writeDashboard(t, dir, "a.json", `{"panels": [
		{"title": "top", "targets": [{"expr": "up"}]},
		{"type": "row", "title": "row", "panels": [{"title": "inner", "targets": [{"expr": "rate(x_total[$__rate_interval])"}]}]}],
	 "templating": {"list": [{"type": "query", "name": "ns", "query": "label_values(up, namespace)"},
		{"type": "datasource", "name": "ds", "query": "prometheus"}]}}`)
	got, err := Queries(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []Query{
		{Dashboard: "a.json", Panel: "top", Expr: "up"},
		{Dashboard: "a.json", Panel: "inner", Expr: "rate(x_total[$__rate_interval])"},
		{Dashboard: "a.json", Panel: "variable ns", Expr: "label_values(up, namespace)", Variable: true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Queries = %+v, want %+v", got, want)
	}
}

func TestQueriesRejectsBadInput(t *testing.T) {
	for name, body := range map[string]string{
		"not JSON":              `{`,
		"variable not a string": `{"templating": {"list": [{"type": "query", "name": "v", "query": {"q": 1}}]}}`,
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeDashboard(t, dir, "bad.json", body)
			if qs, err := Queries(dir); err == nil || !strings.Contains(err.Error(), "bad.json") {
				t.Errorf("Queries = %v, %v; want an error naming bad.json", qs, err)
			}
		})
	}
	if qs, err := Queries(t.TempDir()); err == nil {
		t.Errorf("Queries of an empty directory = %v, want an error", qs)
	}
}

func TestSubstitute(t *testing.T) {
	got := Substitute(`rate(x{pod="$pod",ns="${namespace}",n="$node"}[$__rate_interval]) / ${__range} $__interval`,
		map[string]string{"pod": "p1", "namespace": "ns1"})
	want := `rate(x{pod="p1",ns="ns1",n="$node"}[5m]) / 3h 1m`
	if got != want {
		t.Errorf("Substitute = %s, want %s", got, want)
	}
}
