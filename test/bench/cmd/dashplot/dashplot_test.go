package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"flag"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/emptydir-guard/emptydir-guard/internal/dashboards"
)

var update = flag.Bool("update", false, "rewrite testdata/golden.svg from the renderer")

func TestFormatValue(t *testing.T) {
	tests := []struct {
		v    float64
		unit string
		want string
	}{
		{0, "bytes", "0 B"},
		{1023, "bytes", "1023 B"},
		{1024, "bytes", "1 KiB"},
		{10240000, "bytes", "9.77 MiB"},
		{31264800, "bytes", "29.8 MiB"},
		{252 << 30, "bytes", "252 GiB"},
		{0.0981, "percentunit", "9.81%"},
		{9.77, "percentunit", "977%"},
		{1, "percentunit", "100%"},
		{5, "percent", "5%"},
		{0, "s", "0 s"},
		{0.0000125, "s", "12.5 µs"},
		{0.0025, "s", "2.50 ms"},
		{3.22, "s", "3.22 s"},
		{90, "s", "1.50 min"},
		{7200, "s", "2 hour"},
		{3 * 86400, "s", "3 day"},
		{14 * 86400, "s", "2 week"},
		{730 * 86400, "s", "2 year"},
		{3, "short", "3"},
		{0.0104, "short", "0.0104"},
		{1500, "short", "1.50 K"},
		{2e6, "short", "2 Mil"},
		{-1.5, "short", "-1.50"},
		{math.NaN(), "short", "NaN"},
	}
	for _, tt := range tests {
		if got := formatValue(tt.v, tt.unit); got != tt.want {
			t.Errorf("formatValue(%v, %q) = %q, want %q", tt.v, tt.unit, got, tt.want)
		}
	}
}

func TestValueTicks(t *testing.T) {
	tests := []struct {
		lo, hi float64
		unit   string
		n      int
		want   []string
	}{
		// Bytes at round multiples of the prefix the top falls in, not of powers of ten.
		{0, 29.8 * (1 << 20), "bytes", 3, []string{"0 B", "10 MiB", "20 MiB", "30 MiB"}},
		{0, 1, "percentunit", 5, []string{"0%", "20%", "40%", "60%", "80%", "100%"}},
		{0, 0.025, "short", 5, []string{"0", "0.005", "0.01", "0.015", "0.02", "0.025"}},
		{0, 0.02, "s", 2, []string{"0 s", "10 ms", "20 ms"}},
		// An empty range still gets an axis.
		{0, 0, "short", 2, []string{"0", "0.5", "1"}},
	}
	for _, tt := range tests {
		lo, hi, ticks := valueTicks(tt.lo, tt.hi, tt.unit, tt.n)
		var labels []string
		for _, tk := range ticks {
			labels = append(labels, tk.Label)
		}
		if !reflect.DeepEqual(labels, tt.want) {
			t.Errorf("valueTicks(%v, %v, %q) labels %q, want %q", tt.lo, tt.hi, tt.unit, labels, tt.want)
		}
		if lo > tt.lo || hi < tt.hi || ticks[0].Value != lo || ticks[len(ticks)-1].Value != hi {
			t.Errorf("valueTicks(%v, %v, %q): axis %v..%v does not run from the first tick to the last around the data", tt.lo, tt.hi, tt.unit, lo, hi)
		}
	}
}

func TestGridRectFollowsGrafanasGrid(t *testing.T) {
	const top = 100.0
	full := gridRect(gridPos{X: 0, Y: 0, W: 24, H: 1}, top)
	if full != (rect{X: pagePadding, Y: top, W: gridWidth, H: cellHeight}) {
		t.Errorf("a full-width row = %+v, want the whole grid width and one cell high", full)
	}
	left := gridRect(gridPos{X: 0, Y: 16, W: 12, H: 8}, top)
	right := gridRect(gridPos{X: 12, Y: 16, W: 12, H: 8}, top)
	below := gridRect(gridPos{X: 0, Y: 24, W: 8, H: 7}, top)
	if d := right.X - (left.X + left.W); math.Abs(d-cellMargin) > 1e-9 {
		t.Errorf("gap between side-by-side panels %v, want %v", d, cellMargin)
	}
	if d := below.Y - (left.Y + left.H); math.Abs(d-cellMargin) > 1e-9 {
		t.Errorf("gap between stacked panels %v, want %v", d, cellMargin)
	}
	if math.Abs(right.X+right.W-(pagePadding+gridWidth)) > 1e-9 {
		t.Errorf("a panel at x 12, w 12 ends at %v, want the grid's right edge %v", right.X+right.W, pagePadding+gridWidth)
	}
	if want := 8*cellHeight + 7*cellMargin; left.H != want {
		t.Errorf("h 8 is %v px, want %v (8 cells, 7 margins)", left.H, want)
	}
	if got := gridBottom([]panel{{GridPos: gridPos{Y: 24, H: 7}}, {GridPos: gridPos{Y: 16, H: 8}}}, top); got != below.Y+below.H {
		t.Errorf("gridBottom = %v, want the lowest edge %v", got, below.Y+below.H)
	}
}

func TestColumnWidths(t *testing.T) {
	tests := []struct {
		natural []float64
		width   float64
		want    []float64
	}{
		// Short columns keep their width; the long one is cut to what is left.
		{[]float64{300, 10, 20}, 200, []float64{170, 10, 20}},
		// Two long ones split it.
		{[]float64{300, 20, 500}, 220, []float64{100, 20, 100}},
		// Room to spare is spread evenly.
		{[]float64{10, 20}, 50, []float64{20, 30}},
	}
	for _, tt := range tests {
		got := columnWidths(tt.natural, tt.width)
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("columnWidths(%v, %v) = %v, want %v", tt.natural, tt.width, got, tt.want)
		}
	}
}

func TestLegendRows(t *testing.T) {
	// 45 % of a 200 px body is 90 px: a header and five rows of 15 px.
	if got := legendRows(12, 200); got != 5 {
		t.Errorf("legendRows(12, 200) = %d, want 5", got)
	}
	if got := legendRows(2, 200); got != 2 {
		t.Errorf("legendRows(2, 200) = %d, want 2 (all of them)", got)
	}
	if got := legendRows(3, 20); got != 1 {
		t.Errorf("legendRows(3, 20) = %d, want 1 (never none)", got)
	}
}

func TestDisplayName(t *testing.T) {
	labels := map[string]string{"__name__": "up", "instance": "a:1", "job": "j"}
	tests := []struct{ format, want string }{
		{"up {{instance}}", "up a:1"},
		{"{{ job }}/{{missing}}", "j/"},
		{"", `up{instance="a:1", job="j"}`},
	}
	for _, tt := range tests {
		if got := displayName(tt.format, labels); got != tt.want {
			t.Errorf("displayName(%q) = %q, want %q", tt.format, got, tt.want)
		}
	}
	if got := displayName("", map[string]string{}); got != "Value" {
		t.Errorf("displayName of a series without labels = %q, want Value", got)
	}
}

func TestFieldOverrides(t *testing.T) {
	var p panel
	mustUnmarshal(t, `{"title": "t", "fieldConfig": {"defaults": {"unit": "bytes", "custom": {"fillOpacity": 40, "stacking": {"mode": "normal"}}},
		"overrides": [
			{"matcher": {"id": "byRegexp", "options": ".* limit"}, "properties": [{"id": "custom.stacking", "value": {"mode": "none"}},
				{"id": "color", "value": {"mode": "fixed", "fixedColor": "red"}}, {"id": "custom.lineStyle", "value": {"fill": "dash"}}]},
			{"matcher": {"id": "byName", "options": "ratio"}, "properties": [{"id": "unit", "value": "percentunit"}]}]}}`, &p)
	f, err := p.field("a limit")
	if err != nil {
		t.Fatal(err)
	}
	if f.Unit != "bytes" || f.Stacked || f.Color != "red" || f.Dash == "" || f.FillOpacity != 40 {
		t.Errorf("field(a limit) = %+v, want bytes, not stacked, red, dashed, fill 40", f)
	}
	if f, _ := p.field("used"); !f.Stacked || f.Color != "" || f.Dash != "" {
		t.Errorf("field(used) = %+v, want the defaults (stacked, palette color, solid)", f)
	}
	// The regexp matches the whole name, as Grafana anchors it.
	if f, _ := p.field("a limit exceeded"); f.Color != "" {
		t.Errorf("field(a limit exceeded) = %+v: the override matched part of the name", f)
	}
	if f, _ := p.field("ratio"); f.Unit != "percentunit" {
		t.Errorf("field(ratio) unit %q, want percentunit", f.Unit)
	}
}

func TestTableMergesAndOrganizes(t *testing.T) {
	var p panel
	mustUnmarshal(t, `{"type": "table", "title": "t", "targets": [{"refId": "A"}, {"refId": "B"}],
		"transformations": [{"id": "merge"}, {"id": "organize", "options": {"excludeByName": {"uid": true},
			"indexByName": {"pod": 0, "Value #A": 1, "Value #B": 2}, "renameByName": {"Value #A": "ratio", "Value #B": "used"}}}],
		"options": {"sortBy": [{"displayName": "ratio", "desc": true}]}}`, &p)
	data := dashboards.CapturedPanel{Targets: []dashboards.CapturedTarget{
		{RefID: "A", Series: []dashboards.CapturedSeries{
			series(map[string]string{"__name__": "r", "pod": "a", "uid": "1"}, 0.5),
			series(map[string]string{"__name__": "r", "pod": "b", "uid": "2"}, 2),
		}},
		// B has no __name__: its rows join A's on the labels both have.
		{RefID: "B", Series: []dashboards.CapturedSeries{
			series(map[string]string{"pod": "a", "uid": "1"}, 100),
			series(map[string]string{"pod": "c", "uid": "3"}, 7),
		}},
	}}
	names, sources, rows := tableColumns(p, data)
	if want := []string{"pod", "ratio", "used", "__name__"}; !reflect.DeepEqual(names, want) {
		t.Errorf("columns %q, want %q (indexed first, the rest after, uid left out)", names, want)
	}
	if want := []string{"pod", "Value #A", "Value #B", "__name__"}; !reflect.DeepEqual(sources, want) {
		t.Errorf("sources %q, want %q", sources, want)
	}
	var got []string
	for _, r := range rows {
		got = append(got, r.labels["pod"])
	}
	// Sorted by ratio, descending; c has none and comes last.
	if want := []string{"b", "a", "c"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("rows %q, want %q", got, want)
	}
	if rows[1].values["Value #B"] != 100 || rows[1].values["Value #A"] != 0.5 {
		t.Errorf("row a = %+v, want A 0.5 and B 100 merged", rows[1])
	}
}

func series(labels map[string]string, v float64) dashboards.CapturedSeries {
	return dashboards.CapturedSeries{Labels: labels, Values: []*float64{&v}}
}

func mustUnmarshal(t *testing.T, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatal(err)
	}
}

// goldenDashboard has one panel of each kind drawn, and a row.
const goldenDashboard = `{"title": "Golden", "panels": [
	{"type": "row", "title": "$namespace", "gridPos": {"x": 0, "y": 0, "w": 24, "h": 1}},
	{"type": "stat", "title": "Used", "gridPos": {"x": 0, "y": 1, "w": 6, "h": 4},
	 "targets": [{"refId": "A", "expr": "sum(used{namespace=\"$namespace\"})", "instant": true}],
	 "fieldConfig": {"defaults": {"unit": "bytes", "thresholds": {"steps": [{"value": null, "color": "green"}, {"value": 1000000, "color": "red"}]}}}},
	{"type": "timeseries", "title": "Usage", "gridPos": {"x": 6, "y": 1, "w": 18, "h": 8},
	 "targets": [{"refId": "A", "expr": "used", "legendFormat": "{{pod}}"}, {"refId": "B", "expr": "limit", "legendFormat": "limit"}],
	 "options": {"legend": {"showLegend": true, "calcs": ["lastNotNull", "max"]}},
	 "fieldConfig": {"defaults": {"unit": "bytes", "custom": {"fillOpacity": 10}},
	   "overrides": [{"matcher": {"id": "byName", "options": "limit"}, "properties": [{"id": "color", "value": {"fixedColor": "red"}}, {"id": "custom.lineStyle", "value": {"fill": "dash"}}]}]}},
	{"type": "table", "title": "Pods", "gridPos": {"x": 0, "y": 5, "w": 6, "h": 4},
	 "targets": [{"refId": "A", "expr": "ratio", "instant": true}],
	 "fieldConfig": {"defaults": {}, "overrides": [{"matcher": {"id": "byName", "options": "Value"}, "properties": [{"id": "unit", "value": "percentunit"}]}]}}]}`

func goldenCapture() dashboards.Capture {
	from := time.Date(2026, 12, 7, 20, 0, 0, 0, time.UTC)
	c := dashboards.Capture{Run: "TestGolden at 0000000", From: from, To: from.Add(2 * time.Minute), StepSeconds: 30,
		Variables: map[string]string{"namespace": "ns1"}}
	v := func(xs ...float64) []*float64 {
		out := make([]*float64, len(xs))
		for i, x := range xs {
			if !math.IsNaN(x) {
				out[i] = &xs[i]
			}
		}
		return out
	}
	gap := math.NaN()
	c.Dashboards = []dashboards.CapturedDashboard{{File: "golden.json", Panels: []dashboards.CapturedPanel{
		{Index: 1, Title: "Used", Targets: []dashboards.CapturedTarget{{RefID: "A", Instant: true, Expr: `sum(used{namespace="ns1"})`,
			Series: []dashboards.CapturedSeries{{Labels: map[string]string{}, Values: v(2 << 20)}}}}},
		{Index: 2, Title: "Usage", Targets: []dashboards.CapturedTarget{
			{RefID: "A", Expr: "used", Series: []dashboards.CapturedSeries{
				{Labels: map[string]string{"pod": "b"}, Values: v(0, 1<<20, gap, 3<<20, 2<<20)},
				{Labels: map[string]string{"pod": "a"}, Values: v(gap, gap, 512<<10, gap, gap)}}},
			{RefID: "B", Expr: "limit", Series: []dashboards.CapturedSeries{{Labels: map[string]string{}, Values: v(4<<20, 4<<20, 4<<20, 4<<20, 4<<20)}}}}},
		{Index: 3, Title: "Pods", Targets: []dashboards.CapturedTarget{{RefID: "A", Instant: true, Expr: "ratio",
			Series: []dashboards.CapturedSeries{{Labels: map[string]string{"pod": "a"}, Values: v(0.5)}}}}},
	}}}
	return c
}

// TestRenderGolden draws a small dashboard of every panel kind and compares it with
// testdata/golden.svg (go test -update rewrites it; look at the picture before committing).
func TestRenderGolden(t *testing.T) {
	var d dashboard
	mustUnmarshal(t, goldenDashboard, &d)
	svg, warnings, err := renderDashboard(d, "golden.json", goldenCapture())
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 0 {
		t.Errorf("warnings %q, want none", warnings)
	}
	again, _, _ := renderDashboard(d, "golden.json", goldenCapture())
	if !bytes.Equal(svg, again) {
		t.Error("two renders of the same input differ")
	}
	if err := xml.Unmarshal(svg, new(struct{})); err != nil {
		t.Errorf("not well-formed XML: %v", err)
	}
	for _, want := range []string{
		">ns1</text>",   // the row's title with its variable
		">2 MiB</text>", // the stat in its unit
		">50%</text>",   // the table cell in its override's unit
		`data-name="a"`, // pod a's lone point, drawn
		`stroke="#F2495C" stroke-width="1.5" stroke-dasharray="6,4"`, // the limit, red and dashed
		">3 MiB</text>", // the legend's max of pod b
	} {
		if !strings.Contains(string(svg), want) {
			t.Errorf("picture lacks %s", want)
		}
	}
	// Pod b's gap splits its line in two.
	if n := strings.Count(string(svg), `class="series" data-name="b"`); n != 2 {
		t.Errorf("pod b drawn as %d paths, want 2 (its gap is not bridged)", n)
	}
	golden := filepath.Join("testdata", "golden.svg")
	if *update {
		if err := os.WriteFile(golden, svg, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(svg, want) {
		t.Errorf("the picture differs from %s (go test -update rewrites it)", golden)
	}
}

func TestRenderMarksStaleAndMissingData(t *testing.T) {
	var d dashboard
	mustUnmarshal(t, goldenDashboard, &d)
	c := goldenCapture()
	c.Dashboards[0].Panels[1].Targets[1].Expr = "an older query"
	c.Dashboards[0].Panels = slicesDelete(c.Dashboards[0].Panels, 2) // no data for "Pods"
	svg, warnings, err := renderDashboard(d, "golden.json", c)
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 2 || !strings.Contains(warnings[0], "Usage: target B changed") || !strings.Contains(warnings[1], "Pods: not in the captured data") {
		t.Errorf("warnings %q, want Usage's target B changed and Pods missing", warnings)
	}
	for _, want := range []string{"Usage (data of an older query)", "no captured data (make dashboard-data)"} {
		if !strings.Contains(string(svg), want) {
			t.Errorf("picture lacks %q", want)
		}
	}
	// A dashboard the capture does not know is drawn, every panel with a query saying so.
	svg, warnings, err = renderDashboard(d, "other.json", c)
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 4 || !strings.Contains(warnings[0], "other.json: no captured data") {
		t.Errorf("warnings %q, want the dashboard's and its three panels'", warnings)
	}
	if n := strings.Count(string(svg), "no captured data (make dashboard-data)"); n != 3 {
		t.Errorf("%d panels say they have no data, want 3", n)
	}
}

func slicesDelete[T any](s []T, i int) []T { return append(s[:i:i], s[i+1:]...) }

func TestRunWritesOnePicturePerDashboard(t *testing.T) {
	dir, out := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "golden.json"), []byte(goldenDashboard), 0o644); err != nil {
		t.Fatal(err)
	}
	data, err := goldenCapture().Marshal()
	if err != nil {
		t.Fatal(err)
	}
	dataPath := filepath.Join(dir, "data.json.capture")
	if err := os.WriteFile(dataPath, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run([]string{"-dashboards", dir, "-data", dataPath, "-out", out}); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(out)
	if err != nil || len(entries) != 1 || entries[0].Name() != "golden.svg" {
		t.Errorf("out holds %v (%v), want golden.svg alone", entries, err)
	}
}

// A panel whose targets hold no query is not in the capture (CapturePlan leaves it out): it
// must not take the key of the next panel of its title.
func TestRenderSkipsPanelsWithoutQueries(t *testing.T) {
	var d dashboard
	mustUnmarshal(t, goldenDashboard, &d)
	empty := panel{Type: "stat", Title: "Used", GridPos: gridPos{X: 0, Y: 9, W: 6, H: 4}, Targets: []target{{RefID: "A"}}}
	d.Panels = append([]panel{empty}, d.Panels...)
	svg, warnings, err := renderDashboard(d, "golden.json", goldenCapture())
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 0 {
		t.Errorf("warnings %q, want none", warnings)
	}
	if !strings.Contains(string(svg), ">2 MiB</text>") {
		t.Error("the stat with a query lost its data to the one without")
	}
}
