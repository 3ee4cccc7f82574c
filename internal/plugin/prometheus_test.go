package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// fakePrometheus answers /api/v1/query as Prometheus does, with the vector of series whose
// labels contain every `label="value"` matcher of the query; it records the queries.
func fakePrometheus(t *testing.T, series []map[string]string, values []float64, ages []time.Duration) (string, *[]string) {
	var queries []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		q := r.Form.Get("query")
		queries = append(queries, q)
		now := time.Now()
		var result []map[string]any
		for i, s := range series {
			if !matches(q, s) {
				continue
			}
			ts := float64(now.Add(-ages[i]).UnixMilli()) / 1000
			result = append(result, map[string]any{"metric": s, "value": []any{ts, fmt.Sprint(values[i])}})
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"status": "success", "data": map[string]any{"resultType": "vector", "result": result}})
	}))
	t.Cleanup(srv.Close)
	return srv.URL, &queries
}

// matches is enough of PromQL for topQueries: a name, or __name__=~"a|b", and label="value".
func matches(q string, s map[string]string) bool {
	name, sel, _ := strings.Cut(strings.TrimSuffix(q, "}"), "{")
	if name != "" && name != s["__name__"] {
		return false
	}
	for _, m := range strings.Split(sel, ",") {
		if m == "" {
			continue
		}
		if k, v, ok := strings.Cut(m, "=~"); ok {
			if !strings.Contains("|"+strings.Trim(v, `"`)+"|", "|"+s[k]+"|") {
				return false
			}
			continue
		}
		k, v, _ := strings.Cut(m, "=")
		if s[k] != strings.Trim(v, `"`) {
			return false
		}
	}
	return true
}

func TestTopPrometheus(t *testing.T) {
	vol := func(name, ns, pod, uid, volume string) map[string]string {
		return map[string]string{"__name__": name, "namespace": ns, "pod": pod, "uid": uid, "volume": volume, "node": "node-a", "medium": "disk", "job": "emptydir-exporter"}
	}
	url, queries := fakePrometheus(t,
		[]map[string]string{
			vol("emptydir_used_bytes", "shop", "web", "u-web", "cache"),
			vol("emptydir_limit_bytes", "shop", "web", "u-web", "cache"),
			vol("emptydir_measurement_age_seconds", "shop", "web", "u-web", "cache"),
			vol("emptydir_used_bytes", "other", "x", "u-x", "v"),
			{"__name__": "emptydir_exporter_oldest_trigger_measurement_age_seconds", "node": "node-a"},
		},
		[]float64{524288, 1048576, 2, 1, 4},
		[]time.Duration{3 * time.Second, 3 * time.Second, 3 * time.Second, 0, 3 * time.Second})
	o, out, _ := testOptions("shop")
	o.PrometheusURL = url
	o.Output = "json"
	if err := o.Validate(nil); err != nil {
		t.Fatal(err)
	}
	top := NewTopOptions(o)
	if err := top.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	var got UsageList
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Source != SourcePrometheus || len(got.Items) != 1 {
		t.Fatalf("got %s", out.String())
	}
	u := got.Items[0]
	if u.Pod != "web" || u.UsedBytes != 524288 || *u.Percent != 50 {
		t.Errorf("row %+v", u)
	}
	// The measurement's age is the exporter's age of it plus the sample's own.
	if a := *u.MeasurementAgeSeconds; a < 4.9 || a > 6 {
		t.Errorf("age %v, want about 2s + 3s", a)
	}
	if len(*queries) != 2 || !strings.Contains((*queries)[0], `namespace="shop"`) {
		t.Errorf("queries %q", *queries)
	}
}

// TestTopPrometheusPod: top POD asks Prometheus for that pod's series only.
func TestTopPrometheusPod(t *testing.T) {
	vol := func(pod string) map[string]string {
		return map[string]string{"__name__": "emptydir_used_bytes", "namespace": "shop", "pod": pod, "uid": "u-" + pod, "volume": "v", "node": "node-a"}
	}
	url, queries := fakePrometheus(t, []map[string]string{vol("web"), vol("db")}, []float64{1, 2}, []time.Duration{0, 0})
	o, out, _ := testOptions("shop")
	o.PrometheusURL, o.Output = url, "name"
	top := NewTopOptions(o)
	top.Pod = "web"
	if err := top.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if out.String() != "pod/web\n" || !strings.Contains((*queries)[0], `pod="web"`) {
		t.Errorf("printed %q, queries %q; want pod/web only", out.String(), *queries)
	}
}

// TestTopPrometheusHostileLabels: a shared Prometheus holds whatever labels its writers gave
// their series; top's table shows them quoted, with no control character reaching the
// terminal and no row added.
func TestTopPrometheusHostileLabels(t *testing.T) {
	vol := func(name string) map[string]string {
		return map[string]string{"__name__": name, "namespace": "shop", "pod": "web", "uid": "u-web",
			"volume": "cache\x1b[2J\x1b]0;owned\a", "node": "node-a\nshop  fake  row", "medium": "disk\r", "job": "emptydir-exporter"}
	}
	url, _ := fakePrometheus(t, []map[string]string{vol("emptydir_used_bytes"), vol("emptydir_limit_bytes")},
		[]float64{524288, 1048576}, []time.Duration{0, 0})
	o, out, _ := testOptions("shop")
	o.PrometheusURL = url
	o.Output = "wide"
	if err := o.Validate(nil); err != nil {
		t.Fatal(err)
	}
	if err := NewTopOptions(o).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 2 || strings.ContainsFunc(out.String(), func(r rune) bool { return r < ' ' && r != '\n' }) ||
		!strings.Contains(lines[1], `"emptyDir/cache\x1b[2J\x1b]0;owned\a"`) || !strings.Contains(lines[1], `"node-a\nshop  fake  row"`) ||
		!strings.Contains(lines[1], `"disk\r"`) {
		t.Errorf("table\n%q", out.String())
	}
}
