package remediator

import (
	"testing"
	"time"
)

func TestCapExceeded(t *testing.T) {
	rec := func(ago time.Duration, node, ns string) evictionRecord {
		return evictionRecord{At: testNow.Add(-ago), Node: node, Namespace: ns}
	}
	caps := Caps{PerNode: 2, PerNamespace: 3, Global: 4, Window: 10 * time.Minute}
	tests := []struct {
		name     string
		records  []evictionRecord
		node, ns string
		caps     Caps
		want     string
	}{
		{"empty", nil, "n1", "a", caps, ""},
		{"node full", []evictionRecord{rec(time.Minute, "n1", "a"), rec(time.Minute, "n1", "b")}, "n1", "c", caps, SkipCapNode},
		{"other node free", []evictionRecord{rec(time.Minute, "n1", "a"), rec(time.Minute, "n1", "b")}, "n2", "c", caps, ""},
		{"namespace full", []evictionRecord{rec(time.Minute, "n1", "a"), rec(time.Minute, "n2", "a"), rec(time.Minute, "n3", "a")}, "n4", "a", caps, SkipCapNamespace},
		{"global full", []evictionRecord{rec(time.Minute, "n1", "a"), rec(time.Minute, "n2", "b"), rec(time.Minute, "n3", "c"), rec(time.Minute, "n4", "d")}, "n5", "e", caps, SkipCapGlobal},
		{"old records slide out", []evictionRecord{rec(10*time.Minute, "n1", "a"), rec(11*time.Minute, "n1", "a")}, "n1", "a", caps, ""},
		{"no caps", []evictionRecord{rec(time.Minute, "n1", "a"), rec(time.Minute, "n1", "a"), rec(time.Minute, "n1", "a")}, "n1", "a", Caps{}, ""},
	}
	for _, tt := range tests {
		if got := capExceeded(tt.records, tt.node, tt.ns, testNow, tt.caps); got != tt.want {
			t.Errorf("%s: capExceeded = %q, want %q", tt.name, got, tt.want)
		}
	}
}
