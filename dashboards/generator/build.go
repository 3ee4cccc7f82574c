package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
	"github.com/grafana/grafana-foundation-sdk/go/units"
)

// Stable dashboard uids: links between the views and bookmarks rely on them.
const (
	uidFleet      = "emptydir-fleet"
	uidNamespace  = "emptydir-namespace"
	uidPod        = "emptydir-pod"
	uidRemediator = "emptydir-remediator"

	tag = "emptydir-guard"

	// Job selectors, the same as in rules/emptydir-guard.rules.yml.
	exporterJob   = `job=~".*emptydir-exporter.*"`
	remediatorJob = `job=~".*emptydir-remediator.*"`
)

// The labels the recording rules aggregate the exporter's series by (`max by`), which drops
// the scrape labels (job, instance) and the Prometheus Operator's target labels: a restarted
// exporter pod, the two scrape jobs of the fast/slow split or a second Prometheus job neither
// split nor double a volume, pod or container. The dashboards read the per-volume, per-pod and
// per-container usage and limit from the exporter's series, deduplicated the same way: the
// rules keep no copy of them (rules/emptydir-guard.rules.yml).
const (
	volumeLabels    = "node, namespace, pod, uid, volume, medium"
	podLabels       = "node, namespace, pod, uid"
	containerLabels = "node, namespace, pod, uid, container"
)

// selector is metric{matchers}, or metric alone without matchers.
func selector(metric, matchers string) string {
	if matchers == "" {
		return metric
	}
	return metric + "{" + matchers + "}"
}

// maxBy is one series per labels of the series metric{matchers} selects; a limit (positive
// true) keeps only limits above 0, as the rules do (a limit of 0 is no limit).
func maxBy(labels, metric, matchers string, positive bool) string {
	s := selector(metric, matchers)
	if positive {
		s += " > 0"
	}
	return "max by (" + labels + ") (" + s + ")"
}

// Usage and limit per emptyDir volume, pod and container, deduplicated across scrape jobs; the
// matchers (the dashboards' variables) go inside the exporter's selector, so that a query
// reads the series of its namespace or pod only.
func volumeUsed(matchers string) string {
	return maxBy(volumeLabels, "emptydir_used_bytes", matchers, false)
}
func volumeLimit(matchers string) string {
	return maxBy(volumeLabels, "emptydir_limit_bytes", matchers, true)
}
func podUsed(matchers string) string {
	return maxBy(podLabels, "emptydir_pod_ephemeral_storage_used_bytes", matchers, false)
}
func podLimit(matchers string) string {
	return maxBy(podLabels, "emptydir_pod_ephemeral_storage_limit_bytes", matchers, true)
}
func containerUsed(matchers string) string {
	return maxBy(containerLabels, "emptydir_container_ephemeral_storage_used_bytes", matchers, false)
}
func containerLimit(matchers string) string {
	return maxBy(containerLabels, "emptydir_container_ephemeral_storage_limit_bytes", matchers, true)
}

// File is one generated dashboard.
type File struct {
	Name string
	UID  string
	Data []byte
}

// Render builds every dashboard and returns its JSON, in a stable order.
func Render() ([]File, error) {
	builders := []struct {
		name string
		uid  string
		b    *dashboard.DashboardBuilder
	}{
		{"emptydir-fleet.json", uidFleet, fleet()},
		{"emptydir-namespace.json", uidNamespace, namespaceDashboard()},
		{"emptydir-pod.json", uidPod, podDashboard()},
		{"emptydir-remediator.json", uidRemediator, remediatorDashboard()},
	}
	var files []File
	for _, d := range builders {
		built, err := d.b.Build()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", d.name, err)
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		if err := enc.Encode(built); err != nil {
			return nil, fmt.Errorf("%s: %w", d.name, err)
		}
		files = append(files, File{Name: d.name, UID: d.uid, Data: buf.Bytes()})
	}
	return files, nil
}

func ptr[T any](v T) *T { return &v }

func datasource() common.DataSourceRef {
	return common.DataSourceRef{Type: ptr("prometheus"), Uid: ptr("${datasource}")}
}

// newDashboard sets what every emptyDir guard dashboard shares: uid, tags, time, the
// datasource variable and the links to the other views.
func newDashboard(uid, title, description string) *dashboard.DashboardBuilder {
	return dashboard.NewDashboardBuilder(title).
		Uid(uid).
		Description(description).
		Tags([]string{tag}).
		Editable().
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		Refresh("1m").
		Time("now-3h", "now").
		Timezone("browser").
		WithVariable(dashboard.NewDatasourceVariableBuilder("datasource").
			Label("Data source").
			Type("prometheus")).
		Link(dashboard.NewDashboardLinkBuilder("emptyDir guard").
			Type(dashboard.DashboardLinkTypeDashboards).
			Tags([]string{tag}).
			AsDropdown(true).
			IncludeVars(true).
			KeepTime(true))
}

// queryVariable is a label_values variable over a cheap recording rule.
func queryVariable(name, label, query string) *dashboard.QueryVariableBuilder {
	return dashboard.NewQueryVariableBuilder(name).
		Label(label).
		Datasource(datasource()).
		Query(dashboard.StringOrMap{String: ptr(query)}).
		Definition(query).
		Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
		Sort(dashboard.VariableSortAlphabeticalAsc)
}

func query(expr, legend string) *prometheus.DataqueryBuilder {
	q := prometheus.NewDataqueryBuilder().Datasource(datasource()).Expr(expr).Range()
	if legend != "" {
		q = q.LegendFormat(legend)
	}
	return q
}

func instantTable(expr, refID string) *prometheus.DataqueryBuilder {
	return prometheus.NewDataqueryBuilder().Datasource(datasource()).Expr(expr).
		Instant().Format(prometheus.PromQueryFormatTable).RefId(refID)
}

func timeseriesPanel(title, description, unit string, w, h uint32, queries ...*prometheus.DataqueryBuilder) *timeseries.PanelBuilder {
	p := timeseries.NewPanelBuilder().
		Title(title).
		Description(description).
		Datasource(datasource()).
		Unit(unit).
		Span(w).Height(h).
		LineWidth(1).
		FillOpacity(10).
		ShowPoints(common.VisibilityModeNever).
		Legend(common.NewVizLegendOptionsBuilder().
			DisplayMode(common.LegendDisplayModeTable).
			Placement(common.LegendPlacementBottom).
			ShowLegend(true).
			Calcs([]string{"lastNotNull", "max"})).
		Tooltip(common.NewVizTooltipOptionsBuilder().Mode(common.TooltipDisplayModeMulti).Sort(common.SortOrderDescending))
	for i, q := range queries {
		p = p.WithTarget(q.RefId(refID(i)))
	}
	return p
}

func statPanel(title, description, unit string, w, h uint32, thresholds []dashboard.Threshold, expr string) *stat.PanelBuilder {
	return stat.NewPanelBuilder().
		Title(title).
		Description(description).
		Datasource(datasource()).
		Unit(unit).
		Span(w).Height(h).
		GraphMode(common.BigValueGraphModeArea).
		ColorMode(common.BigValueColorModeValue).
		ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"})).
		Thresholds(dashboard.NewThresholdsConfigBuilder().
			Mode(dashboard.ThresholdsModeAbsolute).
			Steps(thresholds)).
		WithTarget(query(expr, "").RefId("A").Instant())
}

func refID(i int) string { return string(rune('A' + i)) }

func steps(base string, more ...any) []dashboard.Threshold {
	s := []dashboard.Threshold{{Value: nil, Color: base}}
	for i := 0; i+1 < len(more); i += 2 {
		s = append(s, dashboard.Threshold{Value: ptr(more[i].(float64)), Color: more[i+1].(string)})
	}
	return s
}

// ratioThresholds colours usage/limit: 90% is near the limit, 100% over it.
func ratioThresholds() cog.Builder[dashboard.ThresholdsConfig] {
	return dashboard.NewThresholdsConfigBuilder().
		Mode(dashboard.ThresholdsModeAbsolute).
		Steps(steps("green", 0.9, "orange", 1.0, "red"))
}

// column is one value column of a limitTable: an instant query, its column name and unit.
type column struct {
	name, unit, expr string
}

// limitTable is an instant table of things with a limit (pod volumes, pods, containers): one
// instant query per value column, merged into one row per series of the label columns lead
// (first, in that order), the value columns next, then the label columns tail; sorted by the
// first value column, descending. A column named "used / limit" is coloured by ratioThresholds.
// Each row links to the pod drill-down.
func limitTable(title, description string, w, h uint32, lead []string, cols []column, tail []string) *table.PanelBuilder {
	p := mergedTable(title, description, w, h, lead, cols, tail, []string{"Time"}, func(c column) []dashboard.DynamicConfigValue {
		props := []dashboard.DynamicConfigValue{{Id: "unit", Value: c.unit}}
		if c.name == ratioColumn {
			props = append(props,
				dashboard.DynamicConfigValue{Id: "custom.cellOptions", Value: map[string]any{"type": "color-background", "mode": "basic"}},
				dashboard.DynamicConfigValue{Id: "thresholds", Value: map[string]any{"mode": "absolute", "steps": []any{
					map[string]any{"color": "green", "value": nil},
					map[string]any{"color": "orange", "value": 0.9},
					map[string]any{"color": "red", "value": 1},
				}}})
		}
		return props
	})
	return p.Footer(common.NewTableFooterOptionsBuilder().Show(false).Reducer([]string{"sum"})).
		DataLinks([]cog.Builder[dashboard.DashboardLink]{podLink("${__data.fields.namespace}", "${__data.fields.pod}")})
}

// mergedTable is an instant table of one query per value column, merged into one row per
// series of the label columns lead (first, in that order), the value columns next (renamed to
// their names, with the field overrides props gives), then the label columns tail; the fields
// exclude hidden; sorted by the first value column, descending, and filterable.
func mergedTable(title, description string, w, h uint32, lead []string, cols []column, tail, exclude []string,
	props func(column) []dashboard.DynamicConfigValue) *table.PanelBuilder {
	index := map[string]any{}
	rename := map[string]any{}
	for _, l := range lead {
		index[l] = len(index)
	}
	p := table.NewPanelBuilder().
		Title(title).
		Description(description).
		Datasource(datasource()).
		Span(w).Height(h)
	for i, c := range cols {
		ref := refID(i)
		p = p.WithTarget(instantTable(c.expr, ref))
		index["Value #"+ref] = len(index)
		rename["Value #"+ref] = c.name
	}
	for _, l := range tail {
		index[l] = len(index)
	}
	hidden := map[string]any{}
	for _, e := range exclude {
		hidden[e] = true
	}
	p = p.WithTransformation(dashboard.DataTransformerConfig{Id: "merge", Options: map[string]any{}}).
		WithTransformation(dashboard.DataTransformerConfig{Id: "organize", Options: map[string]any{
			"excludeByName": hidden,
			"indexByName":   index,
			"renameByName":  rename,
		}}).
		SortBy([]cog.Builder[common.TableSortByFieldState]{
			common.NewTableSortByFieldStateBuilder().DisplayName(cols[0].name).Desc(true),
		}).
		Filterable(true)
	for _, c := range cols {
		p = p.OverrideByName(c.name, props(c))
	}
	return p
}

const ratioColumn = "used / limit"

// usageColumns are the three columns of a limitTable: used / limit, used and limit.
func usageColumns(used, limit, ratio string) []column {
	return []column{
		{ratioColumn, units.PercentUnit, ratio},
		{"used", units.BytesIEC, used},
		{"limit", units.BytesIEC, limit},
	}
}

// volumeTable is an instant table of pod volumes: used, limit and used/limit merged per
// volume, each row linking to the pod drill-down.
func volumeTable(title, description string, w, h uint32, used, limit, ratio string) *table.PanelBuilder {
	return limitTable(title, description, w, h, []string{"namespace", "pod", "volume"},
		usageColumns(used, limit, ratio), []string{"medium", "node", "uid"})
}

// mapping shows the values of a 0/1 series as words and colours.
func mapping(zero, zeroColor, one, oneColor string) []dashboard.ValueMapping {
	return []dashboard.ValueMapping{{ValueMap: &dashboard.ValueMap{
		Type: dashboard.MappingTypeValueToText,
		Options: map[string]dashboard.ValueMappingResult{
			"0": {Text: ptr(zero), Color: ptr(zeroColor), Index: ptr[int32](0)},
			"1": {Text: ptr(one), Color: ptr(oneColor), Index: ptr[int32](1)},
		},
	}}}
}

// stackedNormal stacks a time series panel's series; seriesNotStacked takes one out again.
func stackedNormal() cog.Builder[common.StackingConfig] {
	return common.NewStackingConfigBuilder().Mode(common.StackingModeNormal).Group("A")
}

var seriesNotStacked = dashboard.DynamicConfigValue{Id: "custom.stacking", Value: map[string]any{"mode": "none", "group": "A"}}

// limitLine draws a limit as a red dashed line without fill; dottedLine a prediction or a
// part dotted.
var (
	limitLine = []dashboard.DynamicConfigValue{
		{Id: "custom.lineStyle", Value: map[string]any{"fill": "dash", "dash": []any{10, 10}}},
		{Id: "custom.fillOpacity", Value: 0},
		{Id: "color", Value: map[string]any{"mode": "fixed", "fixedColor": "red"}},
	}
	dottedLine = []dashboard.DynamicConfigValue{
		{Id: "custom.lineStyle", Value: map[string]any{"fill": "dot"}},
		{Id: "custom.fillOpacity", Value: 0},
	}
)

// podLink opens the pod drill-down for the given (templated) namespace and pod.
func podLink(namespace, pod string) *dashboard.DashboardLinkBuilder {
	return dashboard.NewDashboardLinkBuilder("Pod " + pod).
		Type(dashboard.DashboardLinkTypeLink).
		Url("/d/" + uidPod + "?var-datasource=${datasource}&var-namespace=" + namespace + "&var-pod=" + pod + "&${__url_time_range}")
}

// namespaceLink opens the namespace view for the given (templated) namespace.
func namespaceLink(namespace string) *dashboard.DashboardLinkBuilder {
	return dashboard.NewDashboardLinkBuilder("Namespace " + namespace).
		Type(dashboard.DashboardLinkTypeLink).
		Url("/d/" + uidNamespace + "?var-datasource=${datasource}&var-namespace=" + namespace + "&${__url_time_range}")
}

func row(title string) *dashboard.RowBuilder { return dashboard.NewRowBuilder(title) }

// optIn says which flag and chart value publish the opt-in families (docs/metrics.md,
// "Collectors and opt-in families"): the panels reading them stay empty without.
func optIn(families ...string) string {
	return "published with --metric-opt-in-list=" + strings.Join(families, ",") + " (chart: exporter.metricOptInList)"
}
