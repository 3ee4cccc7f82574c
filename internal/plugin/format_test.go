package plugin

import (
	"errors"
	"strings"
	"testing"
)

func TestFormat(t *testing.T) {
	for _, tc := range []struct {
		got, want string
	}{
		{FormatBytes(0), "0"},
		{FormatBytes(1023), "1023"},
		{FormatBytes(4096), "4Ki"},
		{FormatBytes(921600), "900Ki"},
		{FormatBytes(10 << 20), "10Mi"},
		{FormatBytes(9961472), "9.5Mi"},
		{FormatBytes(3<<30 + 1<<29), "3.5Gi"},
		{FormatBytes(123 << 20), "123Mi"},
		{FormatPercent(0.4), "0.4%"},
		{FormatPercent(87.89), "87%"},
		{FormatPercent(100), "100%"},
		{FormatPercent(1523.7), "1523%"},
		{FormatAge(0.85), "850ms"},
		{FormatAge(4.2), "4s"},
		{FormatAge(130), "2m10s"},
		{FormatAge(600), "10m"},
		{FormatAge(3 * 3600), "3h"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"web-0":             "web-0",
		"":                  "",
		`a "quoted" \ name`: `a "quoted" \ name`,
		"café":              "café",
		"web\n$(id)":        `"web\n$(id)"`,
		"\x1b[31mred":       `"\x1b[31mred"`,
		"a\tb\rc\x00":       `"a\tb\rc\x00"`,
		"\u202eevil":        `"\u202eevil"`,
		"\xff":              `"\xff"`,
		"line\u2028sep":     `"line\u2028sep"`,
		"del\x7f":           `"del\x7f"`,
	} {
		if got := Printable(in); got != want {
			t.Errorf("Printable(%q) = %s, want %s", in, got, want)
		}
	}
	type kind string
	err := errors.New("pod \x1b[2Jweb: gone")
	if got, want := Sprintf("%s %v %s %d %q", "a\nb", err, kind("k\r"), 3, "ok"), `"a\nb" "pod \x1b[2Jweb: gone" "k\r" 3 "ok"`; got != want {
		t.Errorf("Sprintf = %s, want %s", got, want)
	}
	var nilErr *LiveError
	if got := Sprintf("%v", nilErr); got != "<nil>" {
		t.Errorf("Sprintf of a nil *LiveError = %s", got)
	}
	var b strings.Builder
	o := &Options{}
	o.ErrOut = &b
	o.Warnf("Prometheus: %s", "bad\x1b]0;owned\a")
	if want := "Warning: Prometheus: \"bad\\x1b]0;owned\\a\"\n"; b.String() != want {
		t.Errorf("Warnf wrote %q, want %q", b.String(), want)
	}
}
