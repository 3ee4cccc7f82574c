package helmchart_test

import (
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
# Tuning flags: a dot in a key is escaped as --set wants it.
flags:
  log.level: null
resources:
  limits: {memory: 256Mi}
empty: {}
list: [a, b]
# walks <root>/pods | a pipe
source: filesystem
nested:
  inner:
    deep: true
`
	got, err := helmchart.ValuesTable([]byte(values))
	if err != nil {
		t.Fatal(err)
	}
	want := "| value | default | description |\n| --- | --- | --- |\n" +
		"| `image` | | The image. |\n" +
		"| `image.tag` | `\"\"` | Empty: the chart's appVersion. |\n" +
		"| `image.port` | `9731` |  |\n" +
		"| `flags` | | Tuning flags: a dot in a key is escaped as --set wants it. |\n" +
		"| `flags.log\\.level` | `null` |  |\n" +
		"| `resources` | `{\"limits\":{\"memory\":\"256Mi\"}}` |  |\n" +
		"| `empty` | `{}` |  |\n" +
		"| `list` | `[\"a\",\"b\"]` |  |\n" +
		"| `source` | `\"filesystem\"` | walks &lt;root&gt;/pods \\| a pipe |\n" +
		"| `nested.inner.deep` | `true` |  |\n"
	if got != want {
		t.Errorf("ValuesTable:\n%s\nwant:\n%s", got, want)
	}
	if _, err := helmchart.ValuesTable([]byte("- a list\n")); err == nil {
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
