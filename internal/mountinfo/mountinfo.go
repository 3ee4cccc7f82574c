// Package mountinfo holds what the readers of /proc/self/mountinfo share (the writable-layer
// locator in exporter/source, the layout calibration in exporter/calibrate).
package mountinfo

import "strings"

// Unescape undoes the octal escapes the kernel writes into a mountinfo field for a space, a tab,
// a newline and a backslash (\040, \011, \012, \134).
func Unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) && isOctal(s[i+1:i+4]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(s string) bool {
	for i := range len(s) {
		if s[i] < '0' || s[i] > '7' {
			return false
		}
	}
	return true
}
