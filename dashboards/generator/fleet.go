package main

import (
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/units"
)

// Counts of emptyDir volumes, pods and containers over their limits, from the exporter's
// over-limit series (published only while a usage exceeds its limit, never for a memory
// volume), deduplicated across scrape jobs: what the remediation triggers read, one limit per
// pod in the kubelet's order (a pod over an emptyDir's sizeLimit counts as a volume only). Counts of pods
// and containers near their ephemeral-storage limits (above 90%, as the recording rules and
// PodEphemeralStorageNearLimit/ContainerEphemeralStorageNearLimit).
const (
	volumesOverLimit    = `count(max by (uid, volume) (emptydir_over_limit_bytes)) or vector(0)`
	podsOverLimit       = `count(max by (uid) (emptydir_pod_ephemeral_storage_over_limit_bytes)) or vector(0)`
	podsNearLimit       = `sum(namespace:emptydir_pods_ephemeral_storage_near_limit:count) or vector(0)`
	containersOverLimit = `count(max by (uid, container) (emptydir_container_ephemeral_storage_over_limit_bytes)) or vector(0)`
	containersNearLimit = `sum(namespace:emptydir_containers_ephemeral_storage_near_limit:count) or vector(0)`
)

func fleet() *dashboard.DashboardBuilder {
	return newDashboard(uidFleet, "emptyDir guard / Fleet",
		"emptyDir usage against sizeLimit and pods' and containers' ephemeral storage against their limits across the cluster, and the health of the exporters.").
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
			volumeUsed("")+` and on (namespace, pod, uid, volume) topk(20, namespace_pod_volume:emptydir_usage:ratio)`,
			volumeLimit("")+` and on (namespace, pod, uid, volume) topk(20, namespace_pod_volume:emptydir_usage:ratio)`,
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
		WithRow(row("Ephemeral storage (pod and container limits)")).
		WithPanel(statPanel("Pods over limit", "Pods whose ephemeral storage is over their ephemeral-storage limit now (PodEphemeralStorageOverLimit, unless an emptyDir of the pod is over its sizeLimit: the kubelet evicts for that first).", units.Short, 4, 4,
			steps("green", 1.0, "red"), podsOverLimit)).
		WithPanel(statPanel("Pods near limit", "Pods above 90% of their ephemeral-storage limit, not over it.", units.Short, 4, 4,
			steps("green", 1.0, "orange"), podsNearLimit)).
		WithPanel(statPanel("Containers over limit", "Containers over their limits.ephemeral-storage now (ContainerEphemeralStorageOverLimit, unless their pod is over its own limit or an emptyDir's).", units.Short, 4, 4,
			steps("green", 1.0, "red"), containersOverLimit)).
		WithPanel(statPanel("Containers near limit", "Containers above 90% of their limits.ephemeral-storage, not over it.", units.Short, 4, 4,
			steps("green", 1.0, "orange"), containersNearLimit)).
		WithPanel(statPanel("Pods with a limit", "Pods with an ephemeral-storage limit (at least one container with limits.ephemeral-storage): the pods the exporter measures every part of.", units.Short, 4, 4,
			steps("blue"), `count(`+podLimit("")+`) or vector(0)`)).
		WithPanel(statPanel("Lower-bound usages", "Pods whose ephemeral-storage usage is only a lower bound now: a part not measured yet or only in part, or a writable layer not located (see \"Writable layers not located\").", units.Short, 4, 4,
			steps("green", 1.0, "orange"), `count(max by (uid) (emptydir_pod_ephemeral_storage_measurement_incomplete)) or vector(0)`)).
		WithPanel(limitTable("Top pods by ephemeral storage usage / limit",
			"The 20 pods closest to (or over) their ephemeral-storage limit: everything that counts toward it (disk emptyDirs, writable layers, logs, other) against their containers' limits added up. Click a row for the pod drill-down.", 24, 8,
			[]string{"namespace", "pod"},
			usageColumns(
				podUsed("")+` and on (node, namespace, pod, uid) topk(20, namespace_pod:emptydir_pod_ephemeral_storage_usage:ratio)`,
				podLimit("")+` and on (node, namespace, pod, uid) topk(20, namespace_pod:emptydir_pod_ephemeral_storage_usage:ratio)`,
				`topk(20, namespace_pod:emptydir_pod_ephemeral_storage_usage:ratio)`),
			[]string{"node", "uid"})).
		WithPanel(limitTable("Top containers by ephemeral storage usage / limit",
			"The 20 containers closest to (or over) their limits.ephemeral-storage: their logs, plus their writable layer unless the node's image filesystem is dedicated. Click a row for the pod drill-down.", 24, 8,
			[]string{"namespace", "pod", "container"},
			usageColumns(
				containerUsed("")+` and on (node, namespace, pod, uid, container) topk(20, namespace_pod_container:emptydir_container_ephemeral_storage_usage:ratio)`,
				containerLimit("")+` and on (node, namespace, pod, uid, container) topk(20, namespace_pod_container:emptydir_container_ephemeral_storage_usage:ratio)`,
				`topk(20, namespace_pod_container:emptydir_container_ephemeral_storage_usage:ratio)`),
			[]string{"node", "uid"})).
		WithPanel(timeseriesPanel("Pods and containers over and near limit", "Counts of pods and containers over and above 90% of their ephemeral-storage limits.", units.Short, 12, 8,
			query(podsOverLimit, "pods over limit"),
			query(podsNearLimit, "pods near limit (>90%)"),
			query(containersOverLimit, "containers over limit"),
			query(containersNearLimit, "containers near limit (>90%)"))).
		WithPanel(timeseriesPanel("Writable layers not located", "Running containers of pods with a limit whose writable layer the exporter could not locate, by node, reason (other_runtime, no_rootfs_mount, not_overlay, outside_snapshotter, no_layer_record, bad_layer_metadata, no_layer_dir; image_volume_not_mounted, image_volume_missing, no_bundle_config: the layer walked without its image VOLUME directories) and the pods' RuntimeClass: each counts as the kubelet's own figure (its Summary API, where the exporter may ask the kubelet) or else as 0 (or the layer alone), and its pod's and container's usage is a lower bound; ContainerEphemeralStorageLayerUnlocated fires after 10 minutes. 0: every layer on the node located.", units.Short, 12, 8,
			query(`sum by (node, reason, runtime_class) (emptydir_container_writable_layer_unlocated) or on (node) (max by (node) (emptydir_exporter_image_filesystem_dedicated) * 0)`, "{{node}} {{reason}} {{runtime_class}}"))).
		WithRow(row("Exporter health")).
		WithPanel(timeseriesPanel("Exporter up", "1 when Prometheus scraped the exporter; see EmptyDirExporterDown.", units.Short, 8, 7,
			query(`up{`+exporterJob+`}`, "{{instance}}")).Min(0).Max(1)).
		WithPanel(timeseriesPanel("Collection success", "1 when every volume had a measurement and none's latest walk failed; a walk still running keeps its earlier result (its age shows it).", units.Short, 8, 7,
			query(`min by (node, source) (emptydir_exporter_collection_success)`, "{{node}} {{source}}")).Min(0).Max(1)).
		WithPanel(timeseriesPanel("Pod informer synced", "1 when the exporter's node-scoped pod informer has synced.", units.Short, 8, 7,
			query(`min by (node) (emptydir_exporter_pod_informer_synced)`, "{{node}}")).Min(0).Max(1)).
		WithPanel(timeseriesPanel("Collection duration", "Wall time of the last collection cycle.", units.Seconds, 8, 7,
			query(`max by (node, source) (emptydir_exporter_collection_duration_seconds)`, "{{node}} {{source}}"))).
		WithPanel(timeseriesPanel("Oldest measurement age", "Age of the oldest measurement behind a series the over-limit alerts compare (an emptyDir with a sizeLimit, a pod with an ephemeral-storage limit); the kubelet source is 1-2 minutes old by design. See EmptyDirExporterCollectionFailing.", units.Seconds, 8, 7,
			query(`max by (node) (emptydir_exporter_oldest_trigger_measurement_age_seconds)`, "{{node}}"))).
		WithPanel(timeseriesPanel("Since last successful collection", "", units.Seconds, 8, 7,
			query(`time() - max by (node) (emptydir_exporter_last_success_timestamp_seconds)`, "{{node}}"))).
		WithPanel(timeseriesPanel("Measurement errors", "Volumes that could not be measured, per second, by node, source and reason.", units.Short, 12, 7,
			query(`sum by (node, source, reason) (rate(emptydir_exporter_measurement_errors_total[$__rate_interval]))`, "{{node}} {{source}} {{reason}}"))).
		WithPanel(timeseriesPanel("Pods and volumes per node", "", units.Short, 12, 7,
			query(`sum by (node) (emptydir_exporter_volumes)`, "{{node}} volumes"),
			query(`sum by (node) (emptydir_exporter_pods)`, "{{node}} pods"))).
		WithPanel(timeseriesPanel("Walk CPU by namespace", "CPU the exporters' periodic walks of each namespace's pods take, as a share of one core, the 10 largest by node, against the budget each node's walks share (--collection.cpu-budget). Walks of overdue volumes start on their namespace's part of it, the budget split evenly among the node's namespaces: one namespace far above the others holds volumes that cost the most to walk, and past its part its own volumes wait, not the others'.", units.PercentUnit, 12, 7,
			query(`topk(10, sum by (node, namespace) (rate(emptydir_exporter_namespace_walk_cpu_seconds_total[$__rate_interval])))`, "{{node}} {{namespace}}"),
			query(`max(emptydir_exporter_cpu_budget_ratio)`, "budget of a node"))).
		WithPanel(timeseriesPanel("Walks deferred and started overdue", "Due walks the exporters put off, per second, by node and reason (cpu_budget: the budget was spent; no_slot: every walk slot stayed busy), and walks of overdue volumes started whatever the budget held, on their namespace's part of it, the 10 largest by node and namespace. Steady deferrals with overdue walks: the budget does not cover the node's walks at the intervals, and measurements grow older (see EmptyDirExporterCollectionFailing).", units.Short, 12, 7,
			query(`sum by (node, reason) (rate(emptydir_exporter_walks_deferred_total[$__rate_interval]))`, "{{node}} deferred: {{reason}}"),
			query(`topk(10, sum by (node, namespace) (rate(emptydir_exporter_namespace_floor_walks_total[$__rate_interval])))`, "{{node}} {{namespace}} overdue"))).
		WithPanel(timeseriesPanel("Live measurement requests", "Requests to the exporters' live endpoint (made by the remediator), by status code.", units.Short, 12, 7,
			query(`sum by (code) (rate(emptydir_exporter_live_requests_total[$__rate_interval]))`, "{{code}}"))).
		WithPanel(timeseriesPanel("Exporter versions", "", units.Short, 12, 7,
			query(`count by (version, revision, goversion) (emptydir_exporter_build_info)`, "{{version}} {{revision}} {{goversion}}")))
}
