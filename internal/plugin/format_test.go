package plugin

import "testing"

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
