package noticeapi

import "testing"

func TestURL(t *testing.T) {
	for base, want := range map[string]string{
		"http://emptydir-remediator.emptydir-guard.svc:9732": "http://emptydir-remediator.emptydir-guard.svc:9732/notice",
		"https://remediator:9732/":                           "https://remediator:9732/notice",
		"remediator:9732":                                    "",
		"http://":                                            "",
		"ftp://remediator":                                   "",
	} {
		u, err := URL(base)
		switch {
		case want == "" && err == nil:
			t.Errorf("URL(%q) = %s, want an error", base, u)
		case want != "" && (err != nil || u.String() != want):
			t.Errorf("URL(%q) = %v, %v; want %s", base, u, err, want)
		}
	}
}
