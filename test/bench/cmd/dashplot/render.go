package main

import (
	"bytes"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/emptydir-guard/emptydir-guard/internal/dashboards"
	"github.com/emptydir-guard/emptydir-guard/test/bench/svgplot"
)

// Text sizes and the parts of a panel, in px.
const (
	titleSize   = 12.0
	smallSize   = 11.0
	panelTitleH = 26.0
	panelPad    = 8.0
	legendLineH = 15.0
	tableLineH  = 20.0
	gray        = "#6e6e6e"
	gridLine    = "#e6e6e6"
	border      = "#d8d9da"
)

// page is one dashboard's picture being drawn.
type page struct {
	file     string
	capture  dashboards.Capture
	captured map[string]dashboards.CapturedPanel // by panelKey
	body     bytes.Buffer
	// warnings say which panels were drawn from data that no longer fits them.
	warnings []string
}

// panelKey names a panel with queries by its title and how many panels with queries of the
// same title come before it: a panel added or moved elsewhere leaves the others' keys alone,
// so their pictures stay drawn from the captured data.
func panelKey(title string, seen map[string]int) string {
	seen[title]++
	return fmt.Sprintf("%s#%d", title, seen[title])
}

// renderDashboard draws d (file is its name) from the capture; the same inputs give the same
// bytes. The warnings name panels whose data is missing or came from another query.
func renderDashboard(d dashboard, file string, c dashboards.Capture) ([]byte, []string, error) {
	pg := &page{file: file, capture: c, captured: map[string]dashboards.CapturedPanel{}}
	seen := map[string]int{}
	for _, cd := range c.Dashboards {
		if cd.File != file {
			continue
		}
		for _, p := range cd.Panels {
			pg.captured[panelKey(p.Title, seen)] = p
		}
	}
	// A dashboard newer than the capture is drawn all the same, each panel saying it has no
	// data: make generate must not need a real cluster.
	if len(pg.captured) == 0 {
		pg.warnings = append(pg.warnings, file+": no captured data for it")
	}

	title := d.Title
	caption := fmt.Sprintf("Data: %s, %s to %s UTC (step %ds), %s. Drawn by make dashboard-pictures, not by Grafana.",
		c.Run, c.From.UTC().Format("2006-01-02 15:04:05"), c.To.UTC().Format("15:04:05"), c.StepSeconds, variablesText(c.Variables))
	captionLines := svgplot.WrapWords(caption, int(gridWidth/svgplot.TextWidth("x", smallSize)))
	top := 40 + float64(len(captionLines))*14 + 10

	seen = map[string]int{}
	panels := flatten(d.Panels)
	for _, p := range panels {
		key := ""
		if p.hasQueries() {
			key = panelKey(p.Title, seen)
		}
		if err := pg.panel(p, key, gridRect(p.GridPos, top)); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", file, err)
		}
	}
	width := gridWidth + 2*pagePadding
	height := math.Ceil(gridBottom(panels, top) + pagePadding)

	var b bytes.Buffer
	svgplot.Open(&b, width, height, title)
	fmt.Fprintf(&b, `<rect width="%s" height="%s" fill="#f4f5f5"/>`+"\n", svgplot.F0(width), svgplot.F0(height))
	fmt.Fprintf(&b, `<text x="%s" y="28" font-size="16" font-weight="bold">%s</text>`+"\n", svgplot.F1(pagePadding), svgplot.Esc(title))
	for k, l := range captionLines {
		fmt.Fprintf(&b, `<text x="%s" y="%s" font-size="11" fill="%s">%s</text>`+"\n", svgplot.F1(pagePadding), svgplot.F1(46+float64(k)*14), gray, svgplot.Esc(l))
	}
	b.Write(pg.body.Bytes())
	svgplot.Close(&b)
	return b.Bytes(), pg.warnings, nil
}

func variablesText(vars map[string]string) string {
	if len(vars) == 0 {
		return "no variables"
	}
	keys := make([]string, 0, len(vars))
	for k := range vars {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + vars[k]
	}
	return strings.Join(parts, ", ")
}

// panel draws one panel in r; key names its captured data ("" for a panel without queries).
func (pg *page) panel(p panel, key string, r rect) error {
	b := &pg.body
	title := substituteVars(p.Title, pg.capture.Variables)
	if p.Type == "row" {
		fmt.Fprintf(b, `<text x="%s" y="%s" font-size="14" font-weight="bold">%s</text>`+"\n",
			svgplot.F1(r.X), svgplot.F1(r.Y+r.H/2+5), svgplot.Esc(truncate(title, r.W, 14)))
		return nil
	}
	fmt.Fprintf(b, `<g class="panel" data-type="%s">`+"\n", svgplot.Esc(p.Type))
	fmt.Fprintf(b, `<rect x="%s" y="%s" width="%s" height="%s" rx="3" fill="#ffffff" stroke="%s"/>`+"\n",
		svgplot.F1(r.X), svgplot.F1(r.Y), svgplot.F1(r.W), svgplot.F1(r.H), border)
	note := ""
	data, ok := pg.captured[key]
	if key != "" && ok {
		for _, tg := range p.Targets {
			if tg.Expr == "" {
				continue // never captured
			}
			if ct, found := findTarget(data, tg.RefID); !found || ct.Expr != dashboards.Substitute(tg.Expr, pg.capture.Variables) {
				note = " (data of an older query)"
				pg.warnings = append(pg.warnings, fmt.Sprintf("%s / %s: target %s changed since the capture", pg.file, p.Title, tg.RefID))
				break
			}
		}
	}
	for _, ct := range data.Targets {
		if ct.Error != "" {
			note += " (query failed)"
			break
		}
	}
	fmt.Fprintf(b, `<text x="%s" y="%s" font-weight="bold">%s</text>`+"\n",
		svgplot.F1(r.X+panelPad), svgplot.F1(r.Y+17), svgplot.Esc(truncate(title+note, r.W-2*panelPad, titleSize)))
	body := r.inset(panelPad, panelTitleH, panelPad, panelPad)
	var err error
	switch {
	case key != "" && !ok:
		pg.warnings = append(pg.warnings, fmt.Sprintf("%s / %s: not in the captured data", pg.file, p.Title))
		pg.message(body, "no captured data (make dashboard-data)")
	case p.Type == "timeseries":
		err = pg.timeseries(p, data, body)
	case p.Type == "stat":
		err = pg.stat(p, data, body)
	case p.Type == "table":
		err = pg.table(p, data, body)
	default:
		pg.message(body, "panel type "+p.Type+" is not drawn")
	}
	b.WriteString("</g>\n")
	return err
}

// hasQueries says whether the capture holds the panel: it has a target with a query
// (internal/dashboards.CapturePlan).
func (p panel) hasQueries() bool {
	for _, tg := range p.Targets {
		if tg.Expr != "" {
			return true
		}
	}
	return false
}

func findTarget(p dashboards.CapturedPanel, refID string) (dashboards.CapturedTarget, bool) {
	for _, t := range p.Targets {
		if t.RefID == refID {
			return t, true
		}
	}
	return dashboards.CapturedTarget{}, false
}

// message writes a gray line of text in the middle of r, as Grafana's "No data".
func (pg *page) message(r rect, text string) {
	fmt.Fprintf(&pg.body, `<text x="%s" y="%s" text-anchor="middle" fill="%s">%s</text>`+"\n",
		svgplot.F1(r.X+r.W/2), svgplot.F1(r.Y+r.H/2+4), gray, svgplot.Esc(truncate(text, r.W, titleSize)))
}

// drawnSeries is one series of a panel as drawn: its name, configuration and values.
type drawnSeries struct {
	Name   string
	Field  field
	Color  string
	Values []*float64
}

// panelSeries lists the panel's series in target order, each target's sorted by name (then
// by labels), as Grafana lists a Prometheus answer.
func panelSeries(p panel, data dashboards.CapturedPanel) ([]drawnSeries, error) {
	var out []drawnSeries
	for _, tg := range p.Targets {
		ct, ok := findTarget(data, tg.RefID)
		if !ok {
			continue
		}
		type named struct {
			name, labels string
			s            dashboards.CapturedSeries
		}
		var ns []named
		for _, s := range ct.Series {
			ns = append(ns, named{displayName(tg.LegendFormat, s.Labels), labelsText(s.Labels), s})
		}
		sort.SliceStable(ns, func(i, j int) bool {
			if ns[i].name != ns[j].name {
				return ns[i].name < ns[j].name
			}
			return ns[i].labels < ns[j].labels
		})
		for _, n := range ns {
			f, err := p.field(n.name)
			if err != nil {
				return nil, err
			}
			out = append(out, drawnSeries{Name: n.name, Field: f, Values: n.s.Values})
		}
	}
	for i := range out {
		out[i].Color = svgplot.Color(i)
		if out[i].Field.Color != "" {
			out[i].Color = colorOf(out[i].Field.Color)
		}
	}
	return out, nil
}

func labelsText(labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%q,", k, labels[k])
	}
	return b.String()
}

// lastNotNull is Grafana's "Last *" reducer.
func lastNotNull(vs []*float64) (float64, bool) {
	for i := len(vs) - 1; i >= 0; i-- {
		if vs[i] != nil {
			return *vs[i], true
		}
	}
	return 0, false
}

// reduce is one of Grafana's legend calcs over a series.
func reduce(calc string, vs []*float64) (float64, bool) {
	switch calc {
	case "lastNotNull", "last":
		return lastNotNull(vs)
	}
	var sum, n float64
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range vs {
		if v == nil {
			continue
		}
		sum, n = sum+*v, n+1
		lo, hi = math.Min(lo, *v), math.Max(hi, *v)
	}
	if n == 0 {
		return 0, false
	}
	switch calc {
	case "max":
		return hi, true
	case "min":
		return lo, true
	case "mean":
		return sum / n, true
	}
	return 0, false
}

var calcNames = map[string]string{"lastNotNull": "Last *", "last": "Last", "max": "Max", "min": "Min", "mean": "Mean"}

// timeTicks chooses round times from..to, at most n of them.
func timeTicks(from, to time.Time, n int) []time.Time {
	steps := []time.Duration{10 * time.Second, 15 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute,
		5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour,
		3 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour}
	span := to.Sub(from)
	step := steps[len(steps)-1]
	for _, s := range steps {
		if span/s <= time.Duration(max(n, 1)) {
			step = s
			break
		}
	}
	var out []time.Time
	for t := from.Truncate(step); !t.After(to); t = t.Add(step) {
		if !t.Before(from) {
			out = append(out, t)
		}
	}
	return out
}
