package kubename

import (
	"strings"
	"testing"
)

func TestNames(t *testing.T) {
	for _, tc := range []struct {
		name           string
		check          func(string) bool
		valid, invalid []string
	}{
		{"IsKind", IsKind,
			[]string{"Deployment", "StatefulSet", "Job", "myKind", "Work-flow2", "A" + strings.Repeat("b", 62)},
			[]string{"", "Deployment\ntouch /tmp/x\n#", "Job$(id)", "Job`id`", "\x1b[2JPod", "Deploy'ment", "Deploy ment",
				"Deploy;ment", "2Job", "Job-", "A" + strings.Repeat("b", 63), "\u212Aind", "Jöb"}},
		{"IsObjectName", IsObjectName,
			[]string{"web", "cart-7d9f8c6b5", "a.b-c", strings.Repeat("a", 253)},
			[]string{"", "Web", "web\n", "web\rx", "web$(id)", "`id`", "w'e\"b", "web;id", "-web", "\x1b[31mweb", strings.Repeat("a", 254)}},
		{"IsNamespace", IsNamespace,
			[]string{"shop", "kube-system", strings.Repeat("a", 63)},
			[]string{"", "shop\nid", "a.b", "Shop", "shop$(id)", strings.Repeat("a", 64)}},
	} {
		for _, s := range tc.valid {
			if !tc.check(s) {
				t.Errorf("%s(%q) = false, want true", tc.name, s)
			}
		}
		for _, s := range tc.invalid {
			if tc.check(s) {
				t.Errorf("%s(%q) = true, want false", tc.name, s)
			}
		}
	}
}
