package main

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/emptydir-guard/emptydir-guard/test/bench/svgplot"
)

// chart is a horizontal grouped bar chart: one band per category, one bar per series in each.
// Horizontal, so that the tables' long row and column names stay readable as labels.
type chart struct {
	Title      string
	Axis       string // the value axis' label, with its unit
	Caption    string // where the figures come from
	Categories []string
	Series     []series
	Log        bool       // log10 value axis
	Target     *reference // a vertical line, e.g. the 5 % budget
}

type series struct {
	Name   string
	Values []float64 // one per category; NaN where the table has no value
	Labels []string  // the text printed after each bar
}

type reference struct {
	Value float64
	Label string
}

// Fixed layout, in pixels.
const (
	plotWidth   = 560.0
	charWidth   = svgplot.CharWidth
	barHeight   = 14.0
	barGap      = 2.0
	bandPadding = 6.0
	lineHeight  = 15.0
	labelWrap   = 34 // characters per line of a category label
)

// render draws c as SVG; the same chart gives the same bytes.
func render(c chart) ([]byte, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	scale, err := c.scale()
	if err != nil {
		return nil, err
	}

	labels := make([][]string, len(c.Categories))
	widest := 0
	for i, cat := range c.Categories {
		labels[i] = svgplot.WrapWords(cat, labelWrap)
		for _, l := range labels[i] {
			widest = max(widest, utf8.RuneCountInString(l))
		}
	}
	valueChars := 0
	for _, s := range c.Series {
		for _, l := range s.Labels {
			valueChars = max(valueChars, utf8.RuneCountInString(l))
		}
	}
	left := 16 + float64(widest)*charWidth + 8
	right := 16 + float64(valueChars)*charWidth + 6
	width := math.Ceil(left + plotWidth + right)

	var b bytes.Buffer
	var body bytes.Buffer

	// Legend: one row of swatches, wrapped when wider than the figure.
	legendTop := 44.0
	x, y := 16.0, legendTop
	item := func(w float64) (float64, float64) {
		if x > 16 && x+w > width-16 {
			x, y = 16, y+lineHeight+4
		}
		ix, iy := x, y
		x += w
		return ix, iy
	}
	for i, s := range c.Series {
		ix, iy := item(18 + float64(utf8.RuneCountInString(s.Name))*charWidth + 20)
		fmt.Fprintf(&body, `<rect x="%s" y="%s" width="12" height="12" fill="%s"/>`+"\n", svgplot.F1(ix), svgplot.F1(iy), svgplot.Color(i))
		fmt.Fprintf(&body, `<text x="%s" y="%s">%s</text>`+"\n", svgplot.F1(ix+18), svgplot.F1(iy+10.5), svgplot.Esc(s.Name))
	}
	if c.Target != nil {
		ix, iy := item(30 + float64(utf8.RuneCountInString(c.Target.Label))*charWidth + 20)
		fmt.Fprintf(&body, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#d62728" stroke-width="2" stroke-dasharray="5,3"/>`+"\n", svgplot.F1(ix), svgplot.F1(iy+6), svgplot.F1(ix+24), svgplot.F1(iy+6))
		fmt.Fprintf(&body, `<text x="%s" y="%s">%s</text>`+"\n", svgplot.F1(ix+30), svgplot.F1(iy+10.5), svgplot.Esc(c.Target.Label))
	}

	plotTop := y + lineHeight + 14
	plotLeft := left
	bandTops := make([]float64, len(c.Categories)+1)
	bandTops[0] = plotTop
	for i := range c.Categories {
		bars := float64(len(c.Series))*(barHeight+barGap) - barGap
		text := float64(len(labels[i])) * lineHeight
		bandTops[i+1] = bandTops[i] + max(bars, text) + 2*bandPadding
	}
	plotBottom := bandTops[len(c.Categories)]

	// Shading of every other band, then the grid and its ticks, then the bars over them.
	for i := range c.Categories {
		if i%2 == 1 {
			fmt.Fprintf(&body, `<rect x="%s" y="%s" width="%s" height="%s" fill="#f3f3f3"/>`+"\n",
				svgplot.F1(plotLeft), svgplot.F1(bandTops[i]), svgplot.F1(plotWidth), svgplot.F1(bandTops[i+1]-bandTops[i]))
		}
	}
	for _, t := range scale.ticks {
		tx := plotLeft + scale.pos(t.value)
		fmt.Fprintf(&body, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#cccccc"/>`+"\n", svgplot.F1(tx), svgplot.F1(plotTop), svgplot.F1(tx), svgplot.F1(plotBottom))
		fmt.Fprintf(&body, `<text x="%s" y="%s" text-anchor="middle">%s</text>`+"\n", svgplot.F1(tx), svgplot.F1(plotBottom+16), svgplot.Esc(t.label))
	}
	// Under the bars and their labels, which it would otherwise cross out.
	if c.Target != nil {
		tx := plotLeft + scale.pos(c.Target.Value)
		fmt.Fprintf(&body, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#d62728" stroke-width="2" stroke-dasharray="5,3"/>`+"\n", svgplot.F1(tx), svgplot.F1(plotTop-4), svgplot.F1(tx), svgplot.F1(plotBottom))
	}
	for i := range c.Categories {
		lines := labels[i]
		mid := (bandTops[i] + bandTops[i+1]) / 2
		first := mid - float64(len(lines)-1)*lineHeight/2 + 4
		for k, l := range lines {
			fmt.Fprintf(&body, `<text x="%s" y="%s" text-anchor="end">%s</text>`+"\n", svgplot.F1(plotLeft-8), svgplot.F1(first+float64(k)*lineHeight), svgplot.Esc(l))
		}
		bars := float64(len(c.Series))*(barHeight+barGap) - barGap
		top := mid - bars/2
		for j, s := range c.Series {
			v := s.Values[i]
			if math.IsNaN(v) {
				continue
			}
			by := top + float64(j)*(barHeight+barGap)
			w := max(scale.pos(v), 0.5)
			fmt.Fprintf(&body, `<rect class="bar" data-series="%s" x="%s" y="%s" width="%s" height="%s" fill="%s"/>`+"\n",
				svgplot.Esc(s.Name), svgplot.F1(plotLeft), svgplot.F1(by), svgplot.F1(w), svgplot.F1(barHeight), svgplot.Color(j))
			fmt.Fprintf(&body, `<text x="%s" y="%s" font-size="11" stroke="#ffffff" stroke-width="3" paint-order="stroke">%s</text>`+"\n", svgplot.F1(plotLeft+w+4), svgplot.F1(by+barHeight-3), svgplot.Esc(s.Labels[i]))
		}
	}
	fmt.Fprintf(&body, `<path d="M%s %sV%sH%s" fill="none" stroke="#333333"/>`+"\n", svgplot.F1(plotLeft), svgplot.F1(plotTop), svgplot.F1(plotBottom), svgplot.F1(plotLeft+plotWidth))
	fmt.Fprintf(&body, `<text x="%s" y="%s" text-anchor="middle">%s</text>`+"\n", svgplot.F1(plotLeft+plotWidth/2), svgplot.F1(plotBottom+36), svgplot.Esc(c.Axis))
	captionTop := plotBottom + 58
	captionLines := svgplot.WrapWords(c.Caption, int((width-32)/(charWidth*11/12)))
	for k, l := range captionLines {
		fmt.Fprintf(&body, `<text x="16" y="%s" font-size="11" fill="#555555">%s</text>`+"\n", svgplot.F1(captionTop+float64(k)*14), svgplot.Esc(l))
	}
	height := math.Ceil(captionTop + float64(len(captionLines)-1)*14 + 12)

	svgplot.Open(&b, width, height, c.Title)
	fmt.Fprintf(&b, `<text x="16" y="26" font-size="16" font-weight="bold">%s</text>`+"\n", svgplot.Esc(c.Title))
	b.Write(body.Bytes())
	svgplot.Close(&b)
	return b.Bytes(), nil
}

func (c chart) validate() error {
	if len(c.Categories) == 0 || len(c.Series) == 0 {
		return fmt.Errorf("chart %q: no categories or no series", c.Title)
	}
	values := 0
	for _, s := range c.Series {
		if len(s.Values) != len(c.Categories) || len(s.Labels) != len(c.Categories) {
			return fmt.Errorf("chart %q: series %q has %d values and %d labels for %d categories",
				c.Title, s.Name, len(s.Values), len(s.Labels), len(c.Categories))
		}
		for _, v := range s.Values {
			switch {
			case math.IsNaN(v):
			case math.IsInf(v, 0) || v < 0 || c.Log && v == 0:
				return fmt.Errorf("chart %q: series %q: value %v cannot be drawn", c.Title, s.Name, v)
			default:
				values++
			}
		}
	}
	if values == 0 {
		return fmt.Errorf("chart %q: every value is missing", c.Title)
	}
	return nil
}

type tick struct {
	value float64
	label string
}

// axis maps a value to its distance from the plot's left edge.
type axis struct {
	pos   func(float64) float64
	ticks []tick
}

func (c chart) scale() (axis, error) {
	lo, hi := math.Inf(1), 0.0
	for _, s := range c.Series {
		for _, v := range s.Values {
			if !math.IsNaN(v) {
				lo, hi = min(lo, v), max(hi, v)
			}
		}
	}
	if c.Target != nil {
		lo, hi = min(lo, c.Target.Value), max(hi, c.Target.Value)
	}
	if c.Log {
		first, last := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
		if last == first {
			last++
		}
		var ticks []tick
		for e := first; e <= last; e++ {
			ticks = append(ticks, tick{math.Pow(10, e), strconv.FormatFloat(math.Pow(10, e), 'f', int(max(0, -e)), 64)})
		}
		return axis{
			pos:   func(v float64) float64 { return (math.Log10(v) - first) / (last - first) * plotWidth },
			ticks: ticks,
		}, nil
	}
	if hi == 0 {
		return axis{}, errors.New("every value is 0")
	}
	step, decimals := svgplot.NiceStep(hi / 5)
	top := math.Ceil(hi/step-1e-9) * step
	var ticks []tick
	for k := 0; float64(k)*step <= top+step/2; k++ {
		v := float64(k) * step
		ticks = append(ticks, tick{v, strconv.FormatFloat(v, 'f', decimals, 64)})
	}
	return axis{pos: func(v float64) float64 { return v / top * plotWidth }, ticks: ticks}, nil
}
