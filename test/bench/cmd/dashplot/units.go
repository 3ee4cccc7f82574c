package main

import (
	"math"
	"strconv"
	"strings"

	"github.com/emptydir-guard/emptydir-guard/test/bench/svgplot"
)

// formatValue prints v in unit as Grafana's value formats do (its "Standard options" unit):
// bytes with IEC prefixes, seconds scaled to ms, min, hour and day, percentunit as a percent,
// short with K, Mil, Bil; the decimals chosen as Grafana chooses them without a fixed count.
func formatValue(v float64, unit string) string {
	if math.IsNaN(v) {
		return "NaN"
	}
	switch unit {
	case "bytes":
		return scaled(v, 1024, []string{" B", " KiB", " MiB", " GiB", " TiB", " PiB", " EiB"})
	case "percentunit":
		return toFixed(v*100) + "%"
	case "percent":
		return toFixed(v) + "%"
	case "s":
		return seconds(v)
	case "short", "":
		return scaled(v, 1000, []string{"", " K", " Mil", " Bil", " Tri", " Quadr"})
	case "none":
		return toFixed(v)
	default:
		return toFixed(v) + " " + unit
	}
}

// toFixed prints v with Grafana's automatic decimals (getDecimalsForValue): three significant
// digits (9.77, 45.3, 0.0123), none for integers or from 100 up.
func toFixed(v float64) string {
	return strconv.FormatFloat(v, 'f', decimals(v), 64)
}

func decimals(v float64) int {
	if v == math.Trunc(v) || math.IsInf(v, 0) {
		return 0
	}
	return max(0, 2-int(math.Floor(math.Log10(math.Abs(v)))))
}

// scaled divides v by factor until it is below factor and names the step with suffixes.
func scaled(v, factor float64, suffixes []string) string {
	step := 0
	for math.Abs(v) >= factor && step < len(suffixes)-1 {
		v /= factor
		step++
	}
	return toFixed(v) + suffixes[step]
}

// seconds is Grafana's "s" unit: below a second in ms (µs below a millisecond), up to a
// minute in s, then min, hour, day, week, year.
func seconds(v float64) string {
	a := math.Abs(v)
	switch {
	case a == 0:
		return "0 s"
	case a < 1e-3:
		return toFixed(v*1e6) + " µs"
	case a < 1:
		return toFixed(v*1e3) + " ms"
	case a < 60:
		return toFixed(v) + " s"
	case a < 3600:
		return toFixed(v/60) + " min"
	case a < 86400:
		return toFixed(v/3600) + " hour"
	case a < 7*86400:
		return toFixed(v/86400) + " day"
	case a < 365*86400:
		return toFixed(v/(7*86400)) + " week"
	default:
		return toFixed(v/(365*86400)) + " year"
	}
}

// tick is one labelled value of an axis.
type tick struct {
	Value float64
	Label string
}

// valueTicks chooses about n round ticks from lo to hi for unit: bytes at round multiples of
// the IEC prefix hi falls in (2 MiB, 4 MiB), other units at 1, 2 or 5 times a power of ten;
// it returns the axis' ends, widened to the outer ticks.
func valueTicks(lo, hi float64, unit string, n int) (float64, float64, []tick) {
	if hi <= lo {
		hi = lo + 1
	}
	scale := 1.0
	if unit == "bytes" {
		for scale*1024 <= math.Max(math.Abs(hi), math.Abs(lo)) {
			scale *= 1024
		}
	}
	step, _ := svgplot.NiceStep((hi - lo) / scale / float64(n))
	step *= scale
	first := math.Floor(lo/step+1e-9) * step
	last := math.Ceil(hi/step-1e-9) * step
	var ticks []tick
	for k := 0; ; k++ {
		v := first + float64(k)*step
		if v > last+step/2 {
			break
		}
		if math.Abs(v) < step*1e-9 {
			v = 0
		}
		ticks = append(ticks, tick{v, trimZeros(formatValue(v, unit))})
	}
	return first, last, ticks
}

// truncate shortens s with an ellipsis to fit width px at size px.
func truncate(s string, width, size float64) string {
	if svgplot.TextWidth(s, size) <= width {
		return s
	}
	r := []rune(s)
	for len(r) > 0 && svgplot.TextWidth(string(r)+"…", size) > width {
		r = r[:len(r)-1]
	}
	if len(r) == 0 {
		return ""
	}
	return strings.TrimRight(string(r), " ") + "…"
}

// trimZeros drops the trailing zeros of a label's number ("0.600" → "0.6", "20.0 ms" →
// "20 ms"), as Grafana's axes print their ticks.
func trimZeros(label string) string {
	end := strings.IndexFunc(label, func(r rune) bool { return (r < '0' || r > '9') && r != '.' && r != '-' })
	if end < 0 {
		end = len(label)
	}
	num, rest := label[:end], label[end:]
	if strings.Contains(num, ".") {
		num = strings.TrimRight(strings.TrimRight(num, "0"), ".")
	}
	return num + rest
}
