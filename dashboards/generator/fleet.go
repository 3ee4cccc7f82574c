package main

import (
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/units"
)

func fleet() *dashboard.DashboardBuilder {
	return newDashboard(uidFleet, "emptyDir guard / Fleet",
		"emptyDir usage against sizeLimit across the cluster, and the health of the exporters.").
		WithRow(row("Overview")).
		WithPanel(statPanel("Volumes over limit", "Pod volumes using more than their sizeLimit now (EmptyDirOverLimit).", units.Short, 4, 4,
			steps("green", 1.0, "red"), `sum(namespace:emptydir_volumes_over_limit:count) or vector(0)`)).
		WithPanel(statPanel("Volumes near limit", "Pod volumes above 90% of their sizeLimit, not over it.", units.Short, 4, 4,
			steps("green", 1.0, "orange"), `sum(namespace:emptydir_volumes_near_limit:count) or vector(0)`)).
		WithPanel(statPanel("emptyDir volumes", "emptyDir volumes measured.", units.Short, 4, 4,
			steps("blue"), `sum(namespace:emptydir_volumes:count) or vector(0)`)).
		WithPanel(statPanel("With a sizeLimit", "emptyDir volumes that declare a sizeLimit.", units.Short, 4, 4,
			steps("blue"), `sum(namespace:emptydir_volumes_limited:count) or vector(0)`)).
		WithPanel(statPanel("Used", "Bytes used by all emptyDir volumes.", units.BytesIEC, 4, 4,
			steps("blue"), `sum(node:emptydir_used_bytes:sum)`)).
		WithPanel(statPanel("Exporters up", "emptydir-exporter targets scraped successfully / all targets.", units.PercentUnit, 4, 4,
			steps("red", 0.99, "green"), `avg(up{`+exporterJob+`})`)).
		WithRow(row("Volumes")).
		WithPanel(volumeTable("Top volumes by usage / limit",
			"The 20 pod volumes closest to (or over) their sizeLimit. Click a row for the pod drill-down.", 24, 10,
			`namespace_pod_volume:emptydir_used_bytes:max and on (namespace, pod, uid, volume) topk(20, namespace_pod_volume:emptydir_usage:ratio)`,
			`namespace_pod_volume:emptydir_limit_bytes:max and on (namespace, pod, uid, volume) topk(20, namespace_pod_volume:emptydir_usage:ratio)`,
			`topk(20, namespace_pod_volume:emptydir_usage:ratio)`)).
		WithPanel(timeseriesPanel("Volumes over and near limit", "", units.Short, 12, 8,
			query(`sum(namespace:emptydir_volumes_over_limit:count) or vector(0)`, "over limit"),
			query(`sum(namespace:emptydir_volumes_near_limit:count) or vector(0)`, "near limit (>90%)"))).
		WithPanel(timeseriesPanel("Usage by namespace (top 10)", "Click a series for the namespace view.", units.BytesIEC, 12, 8,
			query(`topk(10, namespace:emptydir_used_bytes:sum)`, "{{namespace}}")).
			DataLinks([]cog.Builder[dashboard.DashboardLink]{namespaceLink("${__field.labels.namespace}")})).
		WithPanel(timeseriesPanel("Usage by node", "Bytes used by emptyDir volumes on each node.", units.BytesIEC, 12, 8,
			query(`node:emptydir_used_bytes:sum`, "{{node}}"))).
		WithPanel(timeseriesPanel("Usage by node and medium", "disk, memory (tmpfs, counted as container memory) and hugepages.", units.BytesIEC, 12, 8,
			query(`node_medium:emptydir_used_bytes:sum`, "{{node}} {{medium}}"))).
		WithRow(row("Exporter health")).
		WithPanel(timeseriesPanel("Exporter up", "1 when Prometheus scraped the exporter; see EmptyDirExporterDown.", units.Short, 8, 7,
			query(`up{`+exporterJob+`}`, "{{instance}}")).Min(0).Max(1)).
		WithPanel(timeseriesPanel("Collection success", "1 when every volume had a measurement and none's latest walk failed; a walk still running keeps its earlier result (its age shows it).", units.Short, 8, 7,
			query(`min by (node, source) (emptydir_exporter_collection_success)`, "{{node}} {{source}}")).Min(0).Max(1)).
		WithPanel(timeseriesPanel("Pod informer synced", "1 when the exporter's node-scoped pod informer has synced.", units.Short, 8, 7,
			query(`min by (node) (emptydir_exporter_pod_informer_synced)`, "{{node}}")).Min(0).Max(1)).
		WithPanel(timeseriesPanel("Collection duration", "Wall time of the last collection cycle.", units.Seconds, 8, 7,
			query(`max by (node, source) (emptydir_exporter_collection_duration_seconds)`, "{{node}} {{source}}"))).
		WithPanel(timeseriesPanel("Oldest measurement age", "Age of the oldest measurement the exporter serves (the kubelet source is 1-2 minutes old by design).", units.Seconds, 8, 7,
			query(`max by (node) (emptydir_measurement_age_seconds)`, "{{node}}"))).
		WithPanel(timeseriesPanel("Since last successful collection", "", units.Seconds, 8, 7,
			query(`time() - max by (node) (emptydir_exporter_last_success_timestamp_seconds)`, "{{node}}"))).
		WithPanel(timeseriesPanel("Measurement errors", "Volumes that could not be measured, per second, by node, source and reason.", units.Short, 12, 7,
			query(`sum by (node, source, reason) (rate(emptydir_exporter_measurement_errors_total[$__rate_interval]))`, "{{node}} {{source}} {{reason}}"))).
		WithPanel(timeseriesPanel("Pods and volumes per node", "", units.Short, 12, 7,
			query(`sum by (node) (emptydir_exporter_volumes)`, "{{node}} volumes"),
			query(`sum by (node) (emptydir_exporter_pods)`, "{{node}} pods"))).
		WithPanel(timeseriesPanel("Live measurement requests", "Requests to the exporters' live endpoint (made by the remediator), by status code.", units.Short, 12, 7,
			query(`sum by (code) (rate(emptydir_exporter_live_requests_total[$__rate_interval]))`, "{{code}}"))).
		WithPanel(timeseriesPanel("Exporter versions", "", units.Short, 12, 7,
			query(`count by (version, revision, goversion) (emptydir_exporter_build_info)`, "{{version}} {{revision}} {{goversion}}")))
}
