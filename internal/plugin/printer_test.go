package plugin

import (
	"bytes"
	"strings"
	"testing"
)

func TestPrintTable(t *testing.T) {
	table := &Table{Columns: []Column{{Name: "NAMESPACE"}, {Name: "POD"}, {Name: "NODE", Wide: true}, {Name: "USED"}}}
	table.Add("default", "web-0", "node-a", "12Mi")
	table.Add("kube-system", "a", "node-bb", "1Gi")
	for _, tc := range []struct {
		name            string
		wide, noHeaders bool
		want            string
	}{
		{"table", false, false, "NAMESPACE     POD     USED\ndefault       web-0   12Mi\nkube-system   a       1Gi\n"},
		{"wide", true, false, "NAMESPACE     POD     NODE      USED\ndefault       web-0   node-a    12Mi\nkube-system   a       node-bb   1Gi\n"},
		{"no headers", false, true, "default       web-0   12Mi\nkube-system   a       1Gi\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := PrintTable(&b, table, tc.wide, tc.noHeaders); err != nil {
				t.Fatal(err)
			}
			if b.String() != tc.want {
				t.Errorf("got\n%s\nwant\n%s", b.String(), tc.want)
			}
		})
	}
}

// TestPrintObject: kubectl's -o formats, from cli-runtime, print the typed list (apiVersion,
// kind) and, for -o name, the pods its rows are about, each once.
func TestPrintObject(t *testing.T) {
	list := &UsageList{TypeMeta: TypeMeta("UsageList"), Source: SourceExporters, Items: []Usage{
		{Kind: KindEmptyDir, Namespace: "shop", Pod: "web-0", Name: "cache", UsedBytes: 12},
		{Kind: KindPod, Namespace: "shop", Pod: "web-0", UsedBytes: 20},
		{Kind: KindPod, Namespace: "shop", Pod: "db-0", UsedBytes: 5},
	}}
	for _, tc := range []struct {
		output, template string
		want             string
	}{
		{"json", "", `{
    "kind": "UsageList",
    "apiVersion": "emptydir-guard.io/v1alpha1",
    "source": "exporters",
    "items": [`},
		{"yaml", "", "apiVersion: emptydir-guard.io/v1alpha1\nitems:\n- kind: emptyDir\n"},
		{"name", "", "pod/web-0\npod/db-0\n"},
		{"jsonpath={.items[*].usedBytes}", "", "12 20 5"},
		{"jsonpath", "{.items[0].name}", "cache"},
		{"go-template={{range .items}}{{.pod}} {{end}}", "", "web-0 web-0 db-0 "},
		{"", "{{.kind}}", "UsageList"}, // --template alone: go-template, as kubectl
	} {
		t.Run(tc.output+tc.template, func(t *testing.T) {
			o, out, _ := testOptions("shop")
			o.Output, o.Template = tc.output, tc.template
			f, err := o.Format("wide")
			if err != nil || f != FormatObject {
				t.Fatalf("Format: %v, %v; want FormatObject", f, err)
			}
			if err := o.Print(f, nil, list); err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(out.String(), tc.want) {
				t.Errorf("got\n%s\nwant it to begin with\n%s", out.String(), tc.want)
			}
		})
	}
}

func TestOutputFormat(t *testing.T) {
	for _, tc := range []struct {
		output, template string
		own              []string
		want             Format
		err              string
	}{
		{output: "", want: FormatTable},
		{output: "wide", own: []string{"wide"}, want: FormatWide},
		{output: "patch", own: []string{"wide", "patch"}, want: FormatCustom},
		{output: "json", own: []string{"patch"}, want: FormatObject},
		{output: "kyaml", want: FormatObject},
		{output: "name", want: FormatObject},
		{output: "jsonpath-as-json={.items}", want: FormatObject},
		{output: "wide", err: `unable to match a printer suitable for the output format "wide", allowed formats are: go-template,go-template-file,json,jsonpath,jsonpath-as-json,jsonpath-file,kyaml,name,template,templatefile,yaml`},
		{output: "patch", own: []string{"wide"}, err: `allowed formats are: go-template,go-template-file,json,jsonpath,jsonpath-as-json,jsonpath-file,kyaml,name,template,templatefile,wide,yaml`},
		{output: "custom-columns=A:.a", own: []string{"wide"}, err: `output format "custom-columns=A:.a"`},
		{output: "jsonpath={.items[", err: "unterminated array"},
		{output: "jsonpath", err: "template format specified but no template given"},
	} {
		t.Run(tc.output, func(t *testing.T) {
			o, _, _ := testOptions("shop")
			o.Output, o.Template = tc.output, tc.template
			f, err := o.Format(tc.own...)
			if tc.err != "" {
				if err == nil || !IsUsageError(err) || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("got %v, %v; want a usage error with %q", f, err, tc.err)
				}
				return
			}
			if err != nil || f != tc.want {
				t.Errorf("got %v, %v; want %v", f, err, tc.want)
			}
		})
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
	if err := PrintTable(&b, table, false, false); err != nil {
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
