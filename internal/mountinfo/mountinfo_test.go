package mountinfo

import "testing"

func TestUnescape(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"/var/lib/kubelet", "/var/lib/kubelet"},
		{`/mnt/with\040space`, "/mnt/with space"},
		{`/a\011tab\012nl\134bs`, "/a\ttab\nnl\\bs"},
		{`/trailing\04`, `/trailing\04`}, // too short to be an escape
		{`/not\08x`, `/not\08x`},         // 8 is no octal digit
		{`\040`, " "},
	} {
		if got := Unescape(tc.in); got != tc.want {
			t.Errorf("Unescape(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
