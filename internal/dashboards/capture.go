package dashboards

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// Capture is what a real run's Prometheus answered to every panel target of the dashboards
// over the run's window: the data the docs' dashboard pictures are drawn from
// (test/bench/cmd/dashplot). test/e2e's seed scenario writes it (make dashboard-data).
type Capture struct {
	Run         string              `json:"run"` // the test and commit that made it
	From        time.Time           `json:"from"`
	To          time.Time           `json:"to"`
	StepSeconds int                 `json:"stepSeconds"`
	Variables   map[string]string   `json:"variables"`
	Dashboards  []CapturedDashboard `json:"dashboards"`
}

// CapturedDashboard holds the answers for one dashboard file's panels.
type CapturedDashboard struct {
	File   string          `json:"file"`
	Panels []CapturedPanel `json:"panels"`
}

// CapturedPanel is one panel with targets. The dashboards carry no panel IDs (Grafana assigns
// them on import), so a panel is named by its Index in Flatten's order, and its Title lets
// the reader notice data captured for another version of the dashboard.
type CapturedPanel struct {
	Index   int              `json:"index"`
	Title   string           `json:"title"`
	Targets []CapturedTarget `json:"targets"`
}

// CapturedTarget is one target's answer: an instant target's series hold one value (at To),
// a range target's one value per step from From to To.
type CapturedTarget struct {
	RefID   string           `json:"refId"`
	Instant bool             `json:"instant,omitempty"`
	Expr    string           `json:"expr"` // after Substitute
	Error   string           `json:"error,omitempty"`
	Series  []CapturedSeries `json:"series"`
}

// CapturedSeries is one series on the capture's step grid; nil where Prometheus had no value,
// or one JSON cannot hold (NaN, ±Inf).
type CapturedSeries struct {
	Labels map[string]string `json:"labels"`
	Values []*float64        `json:"values"`
}

// Step is the capture's query resolution.
func (c Capture) Step() time.Duration { return time.Duration(c.StepSeconds) * time.Second }

// Slots is the number of values a range target's series holds.
func (c Capture) Slots() int {
	if c.StepSeconds <= 0 || c.To.Before(c.From) {
		return 0
	}
	return int(c.To.Sub(c.From)/c.Step()) + 1
}

// Flatten lists panels in document order, each row followed by the panels it holds: the
// order CapturedPanel.Index counts in.
func Flatten(panels []Panel) []Panel {
	var out []Panel
	for _, p := range panels {
		out = append(out, p)
		out = append(out, Flatten(p.Panels)...)
	}
	return out
}

// ReadDashboard reads a dashboard file.
func ReadDashboard(path string) (Dashboard, error) {
	var d Dashboard
	data, err := os.ReadFile(path)
	if err != nil {
		return d, err
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return d, fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	return d, nil
}

// CapturePlan returns the panels of a dashboard that have targets, with their targets'
// expressions substituted with vars, and no series yet.
func CapturePlan(d Dashboard, vars map[string]string) []CapturedPanel {
	var out []CapturedPanel
	for i, p := range Flatten(d.Panels) {
		var targets []CapturedTarget
		for _, tg := range p.Targets {
			if tg.Expr == "" {
				continue
			}
			targets = append(targets, CapturedTarget{RefID: tg.RefID, Instant: tg.Instant, Expr: Substitute(tg.Expr, vars)})
		}
		if len(targets) > 0 {
			out = append(out, CapturedPanel{Index: i, Title: p.Title, Targets: targets})
		}
	}
	return out
}

// OnGrid places a series' points on the capture's step grid (a range target) or keeps the
// last point (an instant target), values rounded to 6 significant digits, which a picture
// cannot tell apart and which keep the file small.
func (c Capture) OnGrid(instant bool, times []time.Time, values []float64) []*float64 {
	if instant {
		if len(values) == 0 {
			return []*float64{nil}
		}
		return []*float64{rounded(values[len(values)-1])}
	}
	out := make([]*float64, c.Slots())
	for i, t := range times {
		offset := t.Sub(c.From)
		slot := int((offset + c.Step()/2) / c.Step())
		if offset < 0 || slot >= len(out) {
			continue
		}
		out[slot] = rounded(values[i])
	}
	return out
}

func rounded(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	r, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 6, 64), 64)
	return &r
}

// Marshal encodes c compactly, each dashboard, panel and series on a line of its own, so that
// a new capture's diff reads. The breaks go before keys only an object of those types starts
// with; inside a JSON string their quotes would be escaped, so no string is touched.
func (c Capture) Marshal() ([]byte, error) {
	out, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	for _, key := range []string{`{"file":`, `{"index":`, `{"labels":`} {
		out = bytes.ReplaceAll(out, []byte(key), []byte("\n"+key))
	}
	return append(out, '\n'), nil
}

// ReadCapture reads a file Marshal wrote.
func ReadCapture(path string) (Capture, error) {
	var c Capture
	data, err := os.ReadFile(path)
	if err != nil {
		return c, err
	}
	if err := json.Unmarshal(data, &c); err != nil {
		return c, fmt.Errorf("%s: %w", path, err)
	}
	if c.StepSeconds <= 0 || !c.From.Before(c.To) {
		return c, fmt.Errorf("%s: window %s to %s, step %ds: not a capture", path, c.From, c.To, c.StepSeconds)
	}
	return c, nil
}
