package main

import (
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/units"
)

const ns = `namespace="$namespace"`

func namespaceDashboard() *dashboard.DashboardBuilder {
	return newDashboard(uidNamespace, "emptyDir guard / Namespace",
		"emptyDir usage of the pods of one namespace.").
		WithVariable(queryVariable("namespace", "Namespace", `label_values(namespace:emptydir_used_bytes:sum, namespace)`)).
		Link(dashboard.NewDashboardLinkBuilder("Fleet").
			Type(dashboard.DashboardLinkTypeLink).
			Url("/d/" + uidFleet + "?var-datasource=${datasource}&${__url_time_range}")).
		WithRow(row("$namespace")).
		WithPanel(statPanel("Used", "Bytes used by the namespace's emptyDir volumes.", units.BytesIEC, 6, 4,
			steps("blue"), `sum(namespace:emptydir_used_bytes:sum{`+ns+`})`)).
		WithPanel(statPanel("Volumes", "emptyDir volumes in the namespace / with a sizeLimit.", units.Short, 6, 4,
			steps("blue"), `sum(namespace:emptydir_volumes:count{`+ns+`}) or vector(0)`)).
		WithPanel(statPanel("Over limit", "Volumes over their sizeLimit.", units.Short, 6, 4,
			steps("green", 1.0, "red"), `sum(namespace:emptydir_volumes_over_limit:count{`+ns+`}) or vector(0)`)).
		WithPanel(statPanel("Near limit", "Volumes above 90% of their sizeLimit.", units.Short, 6, 4,
			steps("green", 1.0, "orange"), `sum(namespace:emptydir_volumes_near_limit:count{`+ns+`}) or vector(0)`)).
		WithPanel(volumeTable("Volumes", "Every emptyDir volume in the namespace; used / limit is empty without a sizeLimit. Click a row for the pod.", 24, 10,
			volumeUsed(ns),
			volumeLimit(ns),
			`namespace_pod_volume:emptydir_usage:ratio{`+ns+`}`)).
		WithPanel(timeseriesPanel("Usage / limit by volume", "Only volumes with a sizeLimit. Above 100% the pod is evicted.", units.PercentUnit, 12, 8,
			query(`namespace_pod_volume:emptydir_usage:ratio{`+ns+`}`, "{{pod}} {{volume}}")).
			Thresholds(ratioThresholds()).
			ThresholdsStyle(thresholdsDashed()).
			DataLinks([]cog.Builder[dashboard.DashboardLink]{podLink("$namespace", "${__field.labels.pod}")})).
		WithPanel(timeseriesPanel("Usage by pod", "Bytes used by each pod's emptyDir volumes together.", units.BytesIEC, 12, 8,
			query(`sum by (namespace, pod) (`+volumeUsed(ns)+`)`, "{{pod}}")).
			DataLinks([]cog.Builder[dashboard.DashboardLink]{podLink("$namespace", "${__field.labels.pod}")})).
		WithPanel(timeseriesPanel("Namespace total", "Bytes used against the sum of the sizeLimits.", units.BytesIEC, 24, 7,
			query(`namespace:emptydir_used_bytes:sum{`+ns+`}`, "used"),
			query(`namespace:emptydir_limit_bytes:sum{`+ns+`}`, "sum of sizeLimits"))).
		WithRow(row("Suggested vs current limits")).
		WithPanel(suggestedVolumeLimits()).
		WithPanel(suggestedContainerLimits())
}
