package dashboards

import (
	"bytes"
	"math"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

func TestCapturePlanCountsPanelsInFlattenOrder(t *testing.T) {
	dir := t.TempDir()
	writeDashboard(t, dir, "a.json", `{"panels": [
		{"type": "row", "title": "row", "panels": [
			{"title": "inner", "targets": [{"refId": "A", "expr": "x{pod=\"$pod\"}", "instant": true}, {"refId": "B", "expr": ""}]}]},
		{"title": "text panel"},
		{"title": "after", "targets": [{"refId": "A", "expr": "rate(y[$__rate_interval])"}]}]}`)
	d, err := ReadDashboard(filepath.Join(dir, "a.json"))
	if err != nil {
		t.Fatal(err)
	}
	got := CapturePlan(d, map[string]string{"pod": "p1"})
	want := []CapturedPanel{
		{Index: 1, Title: "inner", Targets: []CapturedTarget{{RefID: "A", Instant: true, Expr: `x{pod="p1"}`}}},
		{Index: 3, Title: "after", Targets: []CapturedTarget{{RefID: "A", Expr: "rate(y[5m])"}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("CapturePlan = %+v, want %+v", got, want)
	}
}

func TestOnGrid(t *testing.T) {
	from := time.Date(2026, 12, 7, 20, 0, 0, 0, time.UTC)
	c := Capture{From: from, To: from.Add(20 * time.Second), StepSeconds: 5}
	if c.Slots() != 5 {
		t.Fatalf("Slots = %d, want 5 (0, 5, 10, 15, 20 s)", c.Slots())
	}
	at := func(s float64) time.Time { return from.Add(time.Duration(s * float64(time.Second))) }
	got := c.OnGrid(false,
		[]time.Time{at(-5), at(0), at(5.2), at(15), at(20), at(25)},
		[]float64{9, 1.23456789, math.NaN(), 3, math.Inf(1), 9})
	want := []any{1.23457, nil, nil, 3.0, nil}
	if len(got) != len(want) {
		t.Fatalf("OnGrid gave %d values, want %d", len(got), len(want))
	}
	for i, w := range want {
		switch {
		case w == nil && got[i] != nil:
			t.Errorf("slot %d = %v, want none", i, *got[i])
		case w != nil && (got[i] == nil || *got[i] != w.(float64)):
			t.Errorf("slot %d = %v, want %v", i, got[i], w)
		}
	}
	if inst := c.OnGrid(true, []time.Time{at(20)}, []float64{42}); len(inst) != 1 || inst[0] == nil || *inst[0] != 42 {
		t.Errorf("instant OnGrid = %v, want [42]", inst)
	}
	if inst := c.OnGrid(true, nil, nil); len(inst) != 1 || inst[0] != nil {
		t.Errorf("instant OnGrid without points = %v, want [nil]", inst)
	}
}

func TestCaptureMarshalRoundTrip(t *testing.T) {
	one := 1.5
	from := time.Date(2026, 12, 7, 20, 0, 0, 0, time.UTC)
	c := Capture{Run: "TestX at abc1234", From: from, To: from.Add(time.Minute), StepSeconds: 30,
		Variables: map[string]string{"pod": "p"},
		Dashboards: []CapturedDashboard{{File: "a.json", Panels: []CapturedPanel{{Index: 2, Title: "p", Targets: []CapturedTarget{
			// A string holding a line-break key stays one string.
			{RefID: "A", Expr: `label_replace(x, "l", "{\"labels\":", "", "")`, Series: []CapturedSeries{
				{Labels: map[string]string{"pod": "p"}, Values: []*float64{&one, nil, &one}},
				{Labels: map[string]string{"pod": "q"}, Values: []*float64{nil, nil, &one}}}}}}}}},
	}
	data, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	// The header, the dashboard, the panel, two series.
	if n := bytes.Count(data, []byte("\n")); n != 5 {
		t.Errorf("%d lines, want 5:\n%s", n, data)
	}
	path := filepath.Join(t.TempDir(), "data.json")
	writeDashboard(t, filepath.Dir(path), "data.json", string(data))
	got, err := ReadCapture(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, c) {
		t.Errorf("ReadCapture(Marshal(c)) = %+v, want %+v", got, c)
	}
}

func TestReadCaptureRejectsNoWindow(t *testing.T) {
	dir := t.TempDir()
	writeDashboard(t, dir, "data.json", `{"from": "2026-12-07T20:00:00Z", "to": "2026-12-07T20:00:00Z", "stepSeconds": 5}`)
	if _, err := ReadCapture(filepath.Join(dir, "data.json")); err == nil {
		t.Error("ReadCapture of an empty window: no error")
	}
}
