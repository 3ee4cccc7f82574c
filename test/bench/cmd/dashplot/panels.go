package main

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/emptydir-guard/emptydir-guard/internal/dashboards"
	"github.com/emptydir-guard/emptydir-guard/test/bench/svgplot"
)

// legendRows is how many series a timeseries legend lists in a body of height h: at most
// what leaves the plot 55 % of the body, at least one; the rest are counted in a last line.
func legendRows(series int, h float64) int {
	fit := int((h*0.45 - legendLineH) / legendLineH)
	return max(1, min(series, fit))
}

// timeseries draws lines (stacked where the field says so) over the capture's window, the
// y axis in the panel's unit, and a legend table with the panel's calcs below.
func (pg *page) timeseries(p panel, data dashboards.CapturedPanel, body rect) error {
	series, err := panelSeries(p, data)
	if err != nil {
		return err
	}
	// Stacked series add up in order; each is drawn from the sum below it.
	bases := make([][]float64, len(series))
	tops := make([][]*float64, len(series))
	stack := make([]float64, pg.capture.Slots())
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, s := range series {
		bases[i] = make([]float64, len(s.Values))
		tops[i] = make([]*float64, len(s.Values))
		for k, v := range s.Values {
			if v == nil || k >= len(stack) {
				continue
			}
			top := *v
			if s.Field.Stacked {
				bases[i][k] = stack[k]
				top += stack[k]
				stack[k] = top
			}
			tops[i][k] = &top
			lo, hi = math.Min(lo, math.Min(top, bases[i][k])), math.Max(hi, top)
		}
	}
	if math.IsInf(lo, 1) {
		pg.message(body, "No data")
		return nil
	}
	f := p.FieldConfig.Defaults
	lo = math.Min(lo, 0)
	if f.Min != nil {
		lo = *f.Min
	}
	if f.Max != nil {
		hi = *f.Max
	}
	lo, hi, yTicks := valueTicks(lo, hi, f.Unit, max(2, int(body.H/45)))
	if f.Min != nil {
		lo = *f.Min
	}
	if f.Max != nil {
		hi = *f.Max
	}

	// The legend first: its height decides the plot's.
	calcs := p.Options.Legend.Calcs
	legendH := 0.0
	shown := 0
	if p.Options.Legend.ShowLegend {
		shown = legendRows(len(series), body.H)
		legendH = float64(shown+1)*legendLineH + 4
	}
	labelW := 0.0
	for _, t := range yTicks {
		labelW = math.Max(labelW, svgplot.TextWidth(t.Label, smallSize))
	}
	plot := body.inset(labelW+6, 4, 4, legendH+18)
	if plot.H < 10 || plot.W < 10 {
		pg.message(body, "too small to draw")
		return nil
	}
	b := &pg.body
	y := func(v float64) float64 { return plot.Y + plot.H - (v-lo)/(hi-lo)*plot.H }
	span := pg.capture.To.Sub(pg.capture.From).Seconds()
	x := func(slot int) float64 { return plot.X + float64(slot*pg.capture.StepSeconds)/span*plot.W }

	for _, t := range yTicks {
		if t.Value < lo-1e-9*math.Abs(hi-lo) || t.Value > hi+1e-9*math.Abs(hi-lo) {
			continue
		}
		ty := y(t.Value)
		fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s"/>`+"\n", svgplot.F1(plot.X), svgplot.F1(ty), svgplot.F1(plot.X+plot.W), svgplot.F1(ty), gridLine)
		fmt.Fprintf(b, `<text x="%s" y="%s" font-size="11" text-anchor="end" fill="%s">%s</text>`+"\n", svgplot.F1(plot.X-4), svgplot.F1(ty+4), gray, svgplot.Esc(t.Label))
	}
	for _, t := range timeTicks(pg.capture.From, pg.capture.To, int(plot.W/100)) {
		tx := plot.X + t.Sub(pg.capture.From).Seconds()/span*plot.W
		layout := "15:04"
		if t.Second() != 0 {
			layout = "15:04:05"
		}
		fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s"/>`+"\n", svgplot.F1(tx), svgplot.F1(plot.Y), svgplot.F1(tx), svgplot.F1(plot.Y+plot.H), gridLine)
		fmt.Fprintf(b, `<text x="%s" y="%s" font-size="11" text-anchor="middle" fill="%s">%s</text>`+"\n", svgplot.F1(tx), svgplot.F1(plot.Y+plot.H+13), gray, t.UTC().Format(layout))
	}
	if f.Thresholds != nil && f.Custom.ThresholdsStyle.Mode == "dashed" {
		for _, st := range f.Thresholds.Steps {
			if st.Value == nil || *st.Value < lo || *st.Value > hi {
				continue
			}
			ty := y(*st.Value)
			fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-dasharray="6,4"/>`+"\n", svgplot.F1(plot.X), svgplot.F1(ty), svgplot.F1(plot.X+plot.W), svgplot.F1(ty), colorOf(st.Color))
		}
	}

	clip := fmt.Sprintf("clip-%s-%d-%d", strings.TrimSuffix(pg.file, ".json"), int(plot.X), int(plot.Y))
	fmt.Fprintf(b, `<clipPath id="%s"><rect x="%s" y="%s" width="%s" height="%s"/></clipPath>`+"\n", clip, svgplot.F1(plot.X), svgplot.F1(plot.Y-1), svgplot.F1(plot.W), svgplot.F1(plot.H+2))
	fmt.Fprintf(b, `<g clip-path="url(#%s)">`+"\n", clip)
	for i, s := range series {
		for _, run := range runs(tops[i]) {
			var line, area strings.Builder
			for k := run[0]; k < run[1]; k++ {
				cmd := "L"
				if k == run[0] {
					cmd = "M"
				}
				fmt.Fprintf(&line, "%s%s %s", cmd, svgplot.F1(x(k)), svgplot.F1(y(*tops[i][k])))
			}
			if s.Field.FillOpacity > 0 {
				area.WriteString(line.String())
				for k := run[1] - 1; k >= run[0]; k-- {
					fmt.Fprintf(&area, "L%s %s", svgplot.F1(x(k)), svgplot.F1(y(math.Max(bases[i][k], lo))))
				}
				fmt.Fprintf(b, `<path d="%sZ" fill="%s" fill-opacity="%s" stroke="none"/>`+"\n", area.String(), s.Color, strconv.FormatFloat(s.Field.FillOpacity/100, 'f', 2, 64))
			}
			if run[1]-run[0] == 1 {
				// One point alone: Grafana marks it, as a line of one point draws nothing.
				k := run[0]
				fmt.Fprintf(b, `<circle class="series" data-name="%s" cx="%s" cy="%s" r="2" fill="%s"/>`+"\n", svgplot.Esc(s.Name), svgplot.F1(x(k)), svgplot.F1(y(*tops[i][k])), s.Color)
				continue
			}
			dash := ""
			if s.Field.Dash != "" {
				dash = ` stroke-dasharray="` + s.Field.Dash + `"`
			}
			fmt.Fprintf(b, `<path class="series" data-name="%s" d="%s" fill="none" stroke="%s" stroke-width="1.5"%s/>`+"\n", svgplot.Esc(s.Name), line.String(), s.Color, dash)
		}
	}
	b.WriteString("</g>\n")
	fmt.Fprintf(b, `<path d="M%s %sV%sH%s" fill="none" stroke="#999999"/>`+"\n", svgplot.F1(plot.X), svgplot.F1(plot.Y), svgplot.F1(plot.Y+plot.H), svgplot.F1(plot.X+plot.W))

	if shown == 0 {
		return nil
	}
	// The legend as Grafana's table mode: name, then one right-aligned column per calc.
	ly := plot.Y + plot.H + 20
	calcW := 78.0
	nameW := body.W - float64(len(calcs))*calcW - 18
	for c, calc := range calcs {
		cx := body.X + body.W - float64(len(calcs)-1-c)*calcW
		fmt.Fprintf(b, `<text x="%s" y="%s" font-size="11" text-anchor="end" fill="%s">%s</text>`+"\n", svgplot.F1(cx), svgplot.F1(ly+11), gray, svgplot.Esc(calcNames[calc]))
	}
	listed := shown
	if len(series) > shown {
		listed = shown - 1
	}
	for i, s := range series[:listed] {
		ry := ly + float64(i+1)*legendLineH
		fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="3"/>`+"\n", svgplot.F1(body.X), svgplot.F1(ry+7), svgplot.F1(body.X+12), svgplot.F1(ry+7), s.Color)
		fmt.Fprintf(b, `<text x="%s" y="%s" font-size="11">%s</text>`+"\n", svgplot.F1(body.X+18), svgplot.F1(ry+11), svgplot.Esc(truncate(s.Name, nameW, smallSize)))
		for c, calc := range calcs {
			text := "-"
			if v, ok := reduce(calc, s.Values); ok {
				text = formatValue(v, s.Field.Unit)
			}
			cx := body.X + body.W - float64(len(calcs)-1-c)*calcW
			fmt.Fprintf(b, `<text x="%s" y="%s" font-size="11" text-anchor="end">%s</text>`+"\n", svgplot.F1(cx), svgplot.F1(ry+11), svgplot.Esc(text))
		}
	}
	if listed < len(series) {
		ry := ly + float64(listed+1)*legendLineH
		fmt.Fprintf(b, `<text x="%s" y="%s" font-size="11" fill="%s">… and %d more series</text>`+"\n", svgplot.F1(body.X+18), svgplot.F1(ry+11), gray, len(series)-listed)
	}
	return nil
}

// runs returns the [start, end) slot ranges where vs has values: Grafana draws no line
// across a gap.
func runs(vs []*float64) [][2]int {
	var out [][2]int
	start := -1
	for k := 0; k <= len(vs); k++ {
		present := k < len(vs) && vs[k] != nil
		switch {
		case present && start < 0:
			start = k
		case !present && start >= 0:
			out = append(out, [2]int{start, k})
			start = -1
		}
	}
	return out
}

// stat draws each series' last value, in its unit or value mapping, colored by the mapping
// or the threshold step it falls in.
func (pg *page) stat(p panel, data dashboards.CapturedPanel, body rect) error {
	series, err := panelSeries(p, data)
	if err != nil {
		return err
	}
	type shown struct{ name, text, color string }
	var values []shown
	for _, s := range series {
		v, ok := lastNotNull(s.Values)
		if !ok {
			continue
		}
		text, color, mapped := p.mapped(v)
		if !mapped {
			text = formatValue(v, s.Field.Unit)
			color = s.Field.Thresholds.stepColor(v)
		}
		if color == "" || p.Options.colorNone() {
			color = "text"
		}
		values = append(values, shown{s.Name, text, colorOf(color)})
	}
	if len(values) == 0 {
		pg.message(body, "No data")
		return nil
	}
	b := &pg.body
	cellW := body.W / float64(len(values))
	for i, v := range values {
		cell := rect{X: body.X + float64(i)*cellW, Y: body.Y, W: cellW, H: body.H}
		size := math.Min(math.Min(cell.H*0.55, 36), (cell.W-8)/(svgplot.TextWidth(v.text, 1)+0.01))
		size = math.Max(size, 10)
		mid := cell.Y + cell.H/2 + size*0.35
		if len(values) > 1 {
			fmt.Fprintf(b, `<text x="%s" y="%s" font-size="11" text-anchor="middle" fill="%s">%s</text>`+"\n", svgplot.F1(cell.X+cell.W/2), svgplot.F1(cell.Y+10), gray, svgplot.Esc(truncate(v.name, cell.W-4, smallSize)))
			mid += 5
		}
		fmt.Fprintf(b, `<text x="%s" y="%s" font-size="%s" font-weight="bold" text-anchor="middle" fill="%s">%s</text>`+"\n",
			svgplot.F1(cell.X+cell.W/2), svgplot.F1(mid), svgplot.F1(size), v.color, svgplot.Esc(v.text))
	}
	return nil
}

// colorNone says the stat's colorMode is "none": the value in the text color.
func (o panelOptions) colorNone() bool { return o.ColorMode == "none" }

// tableRow is one row of a table panel: its label cells and its value cells by column.
type tableRow struct {
	labels map[string]string
	values map[string]float64
}

// tableColumns builds a table panel's rows as Grafana's Prometheus table format and its
// merge and organize transformations do: each target's series a row of its labels and a
// "Value #<refId>" cell; merge joins rows whose shared labels agree; organize drops, orders
// and renames the columns. It returns the column names as shown, their source names and the
// rows, sorted by the panel's sortBy.
func tableColumns(p panel, data dashboards.CapturedPanel) (shownNames, sources []string, rows []tableRow) {
	merge := false
	var organize *transformation
	for i, t := range p.Transformations {
		switch t.ID {
		case "merge":
			merge = true
		case "organize":
			organize = &p.Transformations[i]
		}
	}
	var columns []string
	addColumn := func(c string) {
		if !slices.Contains(columns, c) {
			columns = append(columns, c)
		}
	}
	for ti, tg := range p.Targets {
		if !merge && ti > 0 {
			break // without merge Grafana shows the first frame
		}
		ct, ok := findTarget(data, tg.RefID)
		if !ok {
			continue
		}
		valueCol := "Value"
		if merge && len(p.Targets) > 1 {
			valueCol = "Value #" + tg.RefID
		}
		sorted := slices.Clone(ct.Series)
		sort.SliceStable(sorted, func(i, j int) bool { return labelsText(sorted[i].Labels) < labelsText(sorted[j].Labels) })
		for _, s := range sorted {
			v, ok := lastNotNull(s.Values)
			if !ok {
				continue
			}
			keys := make([]string, 0, len(s.Labels))
			for k := range s.Labels {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				addColumn(k)
			}
			addColumn(valueCol)
			row := -1
			if merge {
				row = matchRow(rows, s.Labels, valueCol)
			}
			if row < 0 {
				rows = append(rows, tableRow{labels: map[string]string{}, values: map[string]float64{}})
				row = len(rows) - 1
			}
			for k, lv := range s.Labels {
				rows[row].labels[k] = lv
			}
			rows[row].values[valueCol] = v
		}
	}
	sources = columns
	if organize != nil {
		o := organize.Options
		sources = slices.DeleteFunc(slices.Clone(columns), func(c string) bool { return o.ExcludeByName[c] })
		sort.SliceStable(sources, func(i, j int) bool {
			ii, iok := o.IndexByName[sources[i]]
			ji, jok := o.IndexByName[sources[j]]
			switch {
			case iok && jok:
				return ii < ji
			default:
				return iok && !jok
			}
		})
	}
	shownNames = make([]string, len(sources))
	for i, c := range sources {
		shownNames[i] = c
		if organize != nil && organize.Options.RenameByName[c] != "" {
			shownNames[i] = organize.Options.RenameByName[c]
		}
	}
	if len(p.Options.SortBy) > 0 {
		by := slices.Index(shownNames, p.Options.SortBy[0].DisplayName)
		desc := p.Options.SortBy[0].Desc
		if by >= 0 {
			src := sources[by]
			sort.SliceStable(rows, func(i, j int) bool {
				a, aok := rows[i].values[src]
				c, cok := rows[j].values[src]
				if aok != cok {
					return aok // rows without the value last
				}
				if desc {
					return a > c
				}
				return a < c
			})
		}
	}
	return shownNames, sources, rows
}

// matchRow is the row a merged series joins: the first without this value column whose
// labels agree with the series' on every label both have, at least one shared.
func matchRow(rows []tableRow, labels map[string]string, valueCol string) int {
	for i, r := range rows {
		if _, taken := r.values[valueCol]; taken {
			continue
		}
		shared, agree := 0, true
		for k, v := range labels {
			if rv, ok := r.labels[k]; ok {
				shared++
				agree = agree && rv == v
			}
		}
		if agree && shared > 0 {
			return i
		}
	}
	return -1
}

// table draws a table panel: a header, as many rows as fit, value cells in their column's
// unit (colored where the column's cells are), then a count of the rows left out.
func (pg *page) table(p panel, data dashboards.CapturedPanel, body rect) error {
	names, sources, rows := tableColumns(p, data)
	if len(rows) == 0 {
		pg.message(body, "No data")
		return nil
	}
	fields := make([]field, len(names))
	cells := make([][]string, len(rows))
	widths := make([]float64, len(names))
	for c, name := range names {
		f, err := p.field(name)
		if err != nil {
			return err
		}
		fields[c] = f
		widths[c] = svgplot.TextWidth(name, smallSize) + 12
	}
	for r, row := range rows {
		cells[r] = make([]string, len(names))
		for c, src := range sources {
			if v, ok := row.values[src]; ok {
				cells[r][c] = formatValue(v, fields[c].Unit)
			} else {
				cells[r][c] = row.labels[src]
			}
			widths[c] = math.Max(widths[c], svgplot.TextWidth(cells[r][c], smallSize)+12)
		}
	}
	widths = columnWidths(widths, body.W)

	b := &pg.body
	fit := max(1, int(body.H/tableLineH)-1)
	listed := min(len(rows), fit)
	if len(rows) > fit {
		listed = fit - 1
	}
	fmt.Fprintf(b, `<rect x="%s" y="%s" width="%s" height="%s" fill="#f4f5f5"/>`+"\n", svgplot.F1(body.X), svgplot.F1(body.Y), svgplot.F1(body.W), svgplot.F1(tableLineH))
	x := body.X
	for c, name := range names {
		fmt.Fprintf(b, `<text x="%s" y="%s" font-size="11" font-weight="bold">%s</text>`+"\n", svgplot.F1(x+6), svgplot.F1(body.Y+14), svgplot.Esc(truncate(name, widths[c]-12, smallSize)))
		x += widths[c]
	}
	for r := range listed {
		ry := body.Y + float64(r+1)*tableLineH
		fmt.Fprintf(b, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s"/>`+"\n", svgplot.F1(body.X), svgplot.F1(ry), svgplot.F1(body.X+body.W), svgplot.F1(ry), gridLine)
		x := body.X
		for c := range names {
			fill := ""
			if v, ok := rows[r].values[sources[c]]; ok && fields[c].CellColored {
				if color := fields[c].Thresholds.stepColor(v); color != "" {
					fmt.Fprintf(b, `<rect x="%s" y="%s" width="%s" height="%s" fill="%s"/>`+"\n", svgplot.F1(x), svgplot.F1(ry+1), svgplot.F1(widths[c]), svgplot.F1(tableLineH-1), colorOf(color))
					fill = ` fill="#ffffff"`
				}
			}
			fmt.Fprintf(b, `<text x="%s" y="%s" font-size="11"%s>%s</text>`+"\n", svgplot.F1(x+6), svgplot.F1(ry+14), fill, svgplot.Esc(truncate(cells[r][c], widths[c]-12, smallSize)))
			x += widths[c]
		}
	}
	if listed < len(rows) {
		ry := body.Y + float64(listed+1)*tableLineH
		fmt.Fprintf(b, `<text x="%s" y="%s" font-size="11" fill="%s">… and %d more rows</text>`+"\n", svgplot.F1(body.X+6), svgplot.F1(ry+14), gray, len(rows)-listed)
	}
	return nil
}

// columnWidths shares width among columns of the given natural widths: a column narrower
// than its fair share keeps its width, the wider ones split what is left equally (and are
// cut); space left over is spread evenly. So short columns stay readable beside long ones.
func columnWidths(natural []float64, width float64) []float64 {
	out := make([]float64, len(natural))
	order := make([]int, len(natural))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool { return natural[order[i]] < natural[order[j]] })
	left := width
	for k, i := range order {
		share := left / float64(len(order)-k)
		out[i] = math.Min(natural[i], share)
		left -= out[i]
	}
	for i := range out {
		out[i] += left / float64(len(out))
	}
	return out
}
