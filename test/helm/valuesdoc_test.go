package helmchart_test

import (
	"slices"
	"strings"
	"testing"

	helmchart "github.com/emptydir-guard/emptydir-guard/test/helm"
)

func TestValuesTable(t *testing.T) {
	values := `# The file's own comment, not a value's.

# -- The image.
image:
  # Empty: the chart's appVersion.
  tag: ""
  port: 9731
  pullPolicy: IfNotPresent # Kubernetes' imagePullPolicy.
# Tuning flags: a dot in a key is escaped as --set wants it.
flags:
  log.level: null
  interval: null
resources:
  limits: {memory: 256Mi}
empty: {}
list: [a, b]
# walks <root>/pods | a pipe
source: filesystem
nested:
  inner:
    deep: true
ratio: 0.5
`
	schema := `{"type": "object", "properties": {
  "image": {"type": "object", "properties": {
    "tag": {"type": "string"},
    "pullPolicy": {"enum": ["Always", "IfNotPresent"]}}},
  "flags": {"type": "object", "properties": {
    "log.level": {"enum": [null, "debug"]},
    "interval": {"anyOf": [{"const": ""}, {"type": ["string", "null"]}]}}},
  "list": {"type": "array", "description": "Without a comment: the schema's <description>."},
  "source": {"type": "string", "description": "The comment wins."}}}`
	got, err := helmchart.ValuesTable([]byte(values), []byte(schema))
	if err != nil {
		t.Fatal(err)
	}
	want := "| key | type | default | description |\n| --- | --- | --- | --- |\n" +
		"| `image` | object | | The image. |\n" +
		"| `image.tag` | string | `\"\"` | Empty: the chart's appVersion. |\n" +
		"| `image.port` | integer | `9731` |  |\n" +
		"| `image.pullPolicy` | one of `\"Always\"`, `\"IfNotPresent\"` | `\"IfNotPresent\"` | Kubernetes' imagePullPolicy. |\n" +
		"| `flags` | object | | Tuning flags: a dot in a key is escaped as --set wants it. |\n" +
		"| `flags.log\\.level` | one of `null`, `\"debug\"` | `null` |  |\n" +
		"| `flags.interval` | string or null | `null` |  |\n" +
		"| `resources` | object | `{\"limits\":{\"memory\":\"256Mi\"}}` |  |\n" +
		"| `empty` | object | `{}` |  |\n" +
		"| `list` | array | `[\"a\",\"b\"]` | Without a comment: the schema's &lt;description&gt;. |\n" +
		"| `source` | string | `\"filesystem\"` | walks &lt;root&gt;/pods \\| a pipe |\n" +
		"| `nested.inner.deep` | boolean | `true` |  |\n" +
		"| `ratio` | number | `0.5` |  |\n"
	if got.Table != want {
		t.Errorf("ValuesTable:\n%s\nwant:\n%s", got.Table, want)
	}
	wantUndocumented := []string{"image.port", "flags.log\\.level", "flags.interval", "resources", "empty", "nested.inner.deep", "ratio"}
	if got.Values != 11 || !slices.Equal(got.Undocumented, wantUndocumented) {
		t.Errorf("values %d, undocumented %q; want 11, %q", got.Values, got.Undocumented, wantUndocumented)
	}
	// Without a schema the types come from the YAML; a null has none.
	noSchema, err := helmchart.ValuesTable([]byte("a: null\nb: x\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := "| `a` |  | `null` |  |\n| `b` | string | `\"x\"` |  |\n"; !strings.HasSuffix(noSchema.Table, want) {
		t.Errorf("without a schema:\n%s\nwant it to end with\n%s", noSchema.Table, want)
	}
	if _, err := helmchart.ValuesTable([]byte("- a list\n"), nil); err == nil {
		t.Error("a values.yaml that is not a map: no error")
	}
}

// TestChartReadmeHasEveryValue: the generated table of the chart README lists every value
// of values.yaml (TestGeneratedFilesAreCurrent checks that it is current).
func TestChartReadmeHasEveryValue(t *testing.T) {
	files, err := helmchart.Generated(root)
	if err != nil {
		t.Fatal(err)
	}
	readme := string(files[helmchart.ChartReadme])
	for _, v := range []string{"`exporter.source`", "`remediator.flags.eviction\\.cooldown`", "`networkPolicy.prometheus.podSelector`", "`dashboards.labelKey`"} {
		if !strings.Contains(readme, "| "+v+" |") {
			t.Errorf("%s has no row for %s", helmchart.ChartReadme, v)
		}
	}
}
