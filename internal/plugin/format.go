package plugin

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"time"
	"unicode/utf8"
)

// FormatBytes prints n in binary units as a person reads them and kubectl top prints them:
// 512, 4Ki, 9.8Mi, 123Mi, 1.5Gi.
func FormatBytes(n int64) string {
	const units = "KMGTPE"
	if n < 1024 && n > -1024 {
		return fmt.Sprint(n)
	}
	v := float64(n)
	i := -1
	for math.Abs(v) >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	if math.Abs(v) < 10 && v != math.Trunc(v) {
		return fmt.Sprintf("%.1f%ci", v, units[i])
	}
	return fmt.Sprintf("%.0f%ci", v, units[i])
}

// FormatPercent prints a share of a limit: 97%, 100%, 1523%, "0.4%" below 1.
func FormatPercent(p float64) string {
	if p > 0 && p < 1 {
		return fmt.Sprintf("%.1f%%", p)
	}
	return fmt.Sprintf("%.0f%%", math.Floor(p))
}

// FormatAge prints a measurement's age as kubectl prints ages (duration.HumanDuration's
// short form): 850ms, 4s, 2m10s, 3h.
func FormatAge(seconds float64) string {
	d := time.Duration(seconds * float64(time.Second))
	switch {
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < 2*time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		m := int(d.Minutes())
		if s := int(d.Seconds()) % 60; s != 0 {
			return fmt.Sprintf("%dm%ds", m, s)
		}
		return fmt.Sprintf("%dm", m)
	}
	return fmt.Sprintf("%dh", int(d.Hours()))
}

// Printable is s as it may reach a terminal: s itself when every rune of it is printable,
// else s quoted as Go quotes strings ("web\n\x1b[2J"). Names and label values come from the
// cluster and from Prometheus, which tenants write: a control character or an escape
// sequence in one must not move the cursor, rewrite the screen or end a line.
func Printable(s string) string {
	for _, r := range s {
		if r == utf8.RuneError || !strconv.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}

// Sprintf is fmt.Sprintf with each argument of a string type, error or fmt.Stringer
// Printable.
func Sprintf(format string, args ...any) string {
	safe := make([]any, len(args))
	for i, a := range args {
		if rv := reflect.ValueOf(a); rv.Kind() == reflect.Pointer && rv.IsNil() {
			safe[i] = a // fmt prints a nil receiver's <nil> without calling it
			continue
		}
		switch v := a.(type) {
		case error:
			safe[i] = Printable(v.Error())
		case fmt.Stringer:
			safe[i] = Printable(v.String())
		default:
			if rv := reflect.ValueOf(a); rv.Kind() == reflect.String {
				safe[i] = Printable(rv.String())
			} else {
				safe[i] = a
			}
		}
	}
	return fmt.Sprintf(format, safe...)
}
