// Package svgplot holds what the docs' SVG figures share (cmd/benchplot's bench plots,
// cmd/dashplot's dashboard pictures): number and text formatting for SVG, a text width
// estimate, axis steps and the series colors. The output must stay byte-for-byte the same
// for the same input: `make check-generated` compares the committed figures.
package svgplot

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// CharWidth estimates one character's width in a 12 px sans-serif font, used only to leave
// room for labels (no font is measured, so the figures do not depend on the machine).
const CharWidth = 6.6

// TextWidth estimates s's width at size px.
func TextWidth(s string, size float64) float64 {
	return float64(utf8.RuneCountInString(s)) * CharWidth * size / 12
}

// Palette is one color per series, in the order a figure lists them (matplotlib's tab10 without
// its red, which marks targets and limits).
var Palette = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#17becf", "#bcbd22", "#e377c2", "#7f7f7f"}

// Color is the i-th series' color, the palette repeating.
func Color(i int) string { return Palette[i%len(Palette)] }

// F1 prints a coordinate with one decimal.
func F1(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// F0 prints a coordinate rounded to an integer.
func F0(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }

var escaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&#39;")

// Esc escapes text for an SVG element or attribute.
func Esc(s string) string { return escaper.Replace(s) }

// NiceStep rounds raw up to 1, 2 or 5 times a power of ten, and says how many decimals print it.
func NiceStep(raw float64) (float64, int) {
	e := math.Floor(math.Log10(raw))
	base := math.Pow(10, e)
	m := 10.0
	for _, f := range []float64{1, 2, 5} {
		if raw <= f*base*(1+1e-9) {
			m = f
			break
		}
	}
	if m == 10 {
		m, e = 1, e+1
	}
	return m * math.Pow(10, e), int(max(0, -e))
}

// WrapWords breaks s into lines of at most width characters, at spaces.
func WrapWords(s string, width int) []string {
	var lines []string
	var line string
	for _, w := range strings.Fields(s) {
		switch {
		case line == "":
			line = w
		case utf8.RuneCountInString(line)+1+utf8.RuneCountInString(w) <= width:
			line += " " + w
		default:
			lines = append(lines, line)
			line = w
		}
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}

// Open writes the svg element's start, its title and a white background: what every figure
// starts with. The caller closes it with Close.
func Open(b *bytes.Buffer, width, height float64, title string) {
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%s" height="%s" viewBox="0 0 %s %s" font-family="sans-serif" font-size="12" fill="#222222">`+"\n",
		F0(width), F0(height), F0(width), F0(height))
	fmt.Fprintf(b, "<title>%s</title>\n", Esc(title))
	fmt.Fprintf(b, `<rect width="%s" height="%s" fill="#ffffff"/>`+"\n", F0(width), F0(height))
}

// Close ends what Open started.
func Close(b *bytes.Buffer) { b.WriteString("</svg>\n") }
