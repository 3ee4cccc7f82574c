package plugin

import (
	"fmt"
	"math"
	"time"
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
