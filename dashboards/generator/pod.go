package main

import (
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/units"
)

const nsPod = `namespace="$namespace", pod="$pod"`

func thresholdsDashed() cog.Builder[common.GraphThresholdsStyleConfig] {
	return common.NewGraphThresholdsStyleConfigBuilder().Mode(common.GraphThresholdsStyleModeDashed)
}

func podDashboard() *dashboard.DashboardBuilder {
	return newDashboard(uidPod, "emptyDir guard / Pod",
		"One pod's emptyDir volumes: usage against sizeLimit over time, capacity and inodes.").
		WithVariable(queryVariable("namespace", "Namespace", `label_values(namespace:emptydir_used_bytes:sum, namespace)`)).
		WithVariable(queryVariable("pod", "Pod", `label_values(namespace_pod:emptydir_used_bytes:sum{namespace="$namespace"}, pod)`)).
		Link(dashboard.NewDashboardLinkBuilder("Namespace").
			Type(dashboard.DashboardLinkTypeLink).
			Url("/d/" + uidNamespace + "?var-datasource=${datasource}&var-namespace=${namespace}&${__url_time_range}")).
		WithRow(row("$namespace / $pod")).
		WithPanel(timeseriesPanel("Usage vs limit", "Bytes used by each volume (solid) and its sizeLimit (dashed). The kubelet evicts above the limit.", units.BytesIEC, 24, 9,
			query(`namespace_pod_volume:emptydir_used_bytes:max{`+nsPod+`}`, "{{volume}} used"),
			query(`namespace_pod_volume:emptydir_limit_bytes:max{`+nsPod+`}`, "{{volume}} limit"),
			query(`predict_linear(namespace_pod_volume:emptydir_used_bytes:max{`+nsPod+`}[30m], 3600) and on (namespace, pod, uid, volume) namespace_pod_volume:emptydir_limit_bytes:max`, "{{volume}} predicted in 1h")).
			OverrideByRegexp(".* limit$", []dashboard.DynamicConfigValue{
				{Id: "custom.lineStyle", Value: map[string]any{"fill": "dash", "dash": []any{10, 10}}},
				{Id: "custom.fillOpacity", Value: 0},
				{Id: "color", Value: map[string]any{"mode": "fixed", "fixedColor": "red"}},
			}).
			OverrideByRegexp(".* predicted in 1h$", []dashboard.DynamicConfigValue{
				{Id: "custom.lineStyle", Value: map[string]any{"fill": "dot"}},
				{Id: "custom.fillOpacity", Value: 0},
			})).
		WithPanel(timeseriesPanel("Usage / limit", "Only volumes with a sizeLimit.", units.PercentUnit, 12, 8,
			query(`namespace_pod_volume:emptydir_usage:ratio{`+nsPod+`}`, "{{volume}}")).
			Thresholds(ratioThresholds()).
			ThresholdsStyle(thresholdsDashed())).
		WithPanel(volumeTable("Volumes now", "uid tells a recreated pod from the one that broke the limit.", 12, 8,
			`namespace_pod_volume:emptydir_used_bytes:max{`+nsPod+`}`,
			`namespace_pod_volume:emptydir_limit_bytes:max{`+nsPod+`}`,
			`namespace_pod_volume:emptydir_usage:ratio{`+nsPod+`}`)).
		WithPanel(timeseriesPanel("Backing filesystem", "Size of and space available on the filesystem behind each volume (the tmpfs for medium Memory).", units.BytesIEC, 12, 8,
			query(`max by (volume) (emptydir_capacity_bytes{`+nsPod+`})`, "{{volume}} capacity"),
			query(`max by (volume) (emptydir_available_bytes{`+nsPod+`})`, "{{volume}} available"))).
		WithPanel(timeseriesPanel("Inodes", "Files, folders and links in each volume.", units.Short, 12, 8,
			query(`max by (volume) (emptydir_inodes_used{`+nsPod+`})`, "{{volume}}"))).
		WithPanel(timeseriesPanel("Unreadable entries", "Entries the exporter could not read: above 0, used bytes are a lower bound.", units.Short, 12, 7,
			query(`max by (volume) (emptydir_unreadable_entries{`+nsPod+`})`, "{{volume}}"))).
		WithPanel(timeseriesPanel("Measurement age", "Seconds between the measurement and the scrape.", units.Seconds, 12, 7,
			query(`max by (volume) (emptydir_measurement_age_seconds{`+nsPod+`})`, "{{volume}}")))
}
