package plugin

import (
	"bytes"
	"testing"
)

func TestPrint(t *testing.T) {
	table := &Table{Columns: []Column{{Name: "NAMESPACE"}, {Name: "POD"}, {Name: "NODE", Wide: true}, {Name: "USED"}}}
	table.Add("default", "web-0", "node-a", "12Mi")
	table.Add("kube-system", "a", "node-bb", "1Gi")
	v := map[string]any{"items": []map[string]any{{"pod": "web-0", "usedBytes": 12582912}}}
	for _, tc := range []struct {
		name      string
		output    string
		noHeaders bool
		want      string
	}{
		{"table", "", false, "NAMESPACE     POD     USED\ndefault       web-0   12Mi\nkube-system   a       1Gi\n"},
		{"wide", "wide", false, "NAMESPACE     POD     NODE      USED\ndefault       web-0   node-a    12Mi\nkube-system   a       node-bb   1Gi\n"},
		{"no headers", "", true, "default       web-0   12Mi\nkube-system   a       1Gi\n"},
		{"json", "json", false, "{\n    \"items\": [\n        {\n            \"pod\": \"web-0\",\n            \"usedBytes\": 12582912\n        }\n    ]\n}\n"},
		{"yaml", "yaml", true, "items:\n- pod: web-0\n  usedBytes: 12582912\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := ParseOutput(tc.output)
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			if err := Print(&b, f, tc.noHeaders, table, v); err != nil {
				t.Fatal(err)
			}
			if b.String() != tc.want {
				t.Errorf("got\n%s\nwant\n%s", b.String(), tc.want)
			}
		})
	}
}

func TestParseOutputRejects(t *testing.T) {
	for _, s := range []string{"name", "jsonpath={.x}", "JSON", "custom-columns=A:.a"} {
		if _, err := ParseOutput(s); err == nil || !IsUsageError(err) {
			t.Errorf("-o %s: got %v, want a usage error", s, err)
		}
	}
}

func TestParseOutputExtra(t *testing.T) {
	if f, err := ParseOutput("patch", "patch"); err != nil || f != FormatCustom {
		t.Errorf("-o patch with patch added: %v, %v; want FormatCustom", f, err)
	}
	if f, err := ParseOutput("json", "patch"); err != nil || f != FormatJSON {
		t.Errorf("-o json with patch added: %v, %v; want FormatJSON", f, err)
	}
	_, err := ParseOutput("patch")
	if err == nil || err.Error() != `unable to match a printer suitable for the output format "patch", allowed formats are: json, wide, yaml` {
		t.Errorf("-o patch without it: %v", err)
	}
	_, err = ParseOutput("name", "patch")
	if err == nil || err.Error() != `unable to match a printer suitable for the output format "name", allowed formats are: json, patch, wide, yaml` {
		t.Errorf("-o name with patch added: %v", err)
	}
}

// TestPrintHostile: a table's cells come from the cluster and from Prometheus, which tenants
// write: no control character, escape sequence or invalid UTF-8 of theirs reaches the
// terminal, and none breaks the columns or adds a row.
func TestPrintHostile(t *testing.T) {
	table := &Table{Columns: []Column{{Name: "POD"}, {Name: "TARGET"}, {Name: "USED"}}}
	table.Add("web", "emptyDir/cache", "1Mi")
	table.Add("web\x1b[2J\x1b]0;owned\a", "emptyDir/a\tb", "2Mi")
	table.Add("evil\nweb", "emptyDir/c\r", "3Mi")
	table.Add("\u202eresu", "emptyDir/\xff", "4Mi")
	var b bytes.Buffer
	if err := Print(&b, FormatTable, false, table, nil); err != nil {
		t.Fatal(err)
	}
	want := `POD                          TARGET            USED
web                          emptyDir/cache    1Mi
"web\x1b[2J\x1b]0;owned\a"   "emptyDir/a\tb"   2Mi
"evil\nweb"                  "emptyDir/c\r"    3Mi
"\u202eresu"                 "emptyDir/\xff"   4Mi
`
	if b.String() != want {
		t.Errorf("got\n%q\nwant\n%q", b.String(), want)
	}
}
