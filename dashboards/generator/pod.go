package main

import (
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/units"
)

const nsPod = `namespace="$namespace", pod="$pod"`

// The variables list the namespaces and pods with an emptyDir volume or an ephemeral-storage
// limit: namespaceMetrics from the namespace sums of the recording rules and the exporter's
// per-pod series (a few per node), podMetrics from the exporter's series of the selected
// namespace only.
const (
	namespaceMetrics = "namespace:emptydir_used_bytes:sum|emptydir_pod_ephemeral_storage_used_bytes"
	podMetrics       = "emptydir_used_bytes|emptydir_pod_ephemeral_storage_used_bytes"
)

func thresholdsDashed() cog.Builder[common.GraphThresholdsStyleConfig] {
	return common.NewGraphThresholdsStyleConfigBuilder().Mode(common.GraphThresholdsStyleModeDashed)
}

func podDashboard() *dashboard.DashboardBuilder {
	b := newDashboard(uidPod, "emptyDir guard / Pod",
		"One pod's emptyDir volumes (usage against sizeLimit over time, capacity and inodes) and its "+
			"ephemeral storage against the pod's and its containers' ephemeral-storage limits.").
		// Pods with an emptyDir volume or an ephemeral-storage limit: either has panels here.
		WithVariable(queryVariable("namespace", "Namespace", `label_values({__name__=~"`+namespaceMetrics+`"}, namespace)`)).
		WithVariable(queryVariable("pod", "Pod", `label_values({__name__=~"`+podMetrics+`", namespace="$namespace"}, pod)`)).
		Link(dashboard.NewDashboardLinkBuilder("Namespace").
			Type(dashboard.DashboardLinkTypeLink).
			Url("/d/" + uidNamespace + "?var-datasource=${datasource}&var-namespace=${namespace}&${__url_time_range}")).
		WithRow(row("$namespace / $pod")).
		WithPanel(timeseriesPanel("Usage vs limit", "Bytes used by each volume (solid) and its sizeLimit (dashed). The kubelet evicts above the limit.", units.BytesIEC, 24, 9,
			query(volumeUsed(nsPod), "{{volume}} used"),
			query(volumeLimit(nsPod), "{{volume}} limit"),
			query(`max by (`+volumeLabels+`) (predict_linear(emptydir_used_bytes{`+nsPod+`}[30m], 3600)) and on (namespace, pod, uid, volume) `+volumeLimit(nsPod), "{{volume}} predicted in 1h")).
			OverrideByRegexp(".* limit$", limitLine).
			OverrideByRegexp(".* predicted in 1h$", dottedLine)).
		WithPanel(timeseriesPanel("Usage / limit", "Only volumes with a sizeLimit.", units.PercentUnit, 12, 8,
			query(`namespace_pod_volume:emptydir_usage:ratio{`+nsPod+`}`, "{{volume}}")).
			Thresholds(ratioThresholds()).
			ThresholdsStyle(thresholdsDashed())).
		WithPanel(volumeTable("Volumes now", "uid tells a recreated pod from the one that broke the limit.", 12, 8,
			volumeUsed(nsPod),
			volumeLimit(nsPod),
			`namespace_pod_volume:emptydir_usage:ratio{`+nsPod+`}`)).
		WithPanel(timeseriesPanel("Backing filesystem", "Size of and space available on the filesystem of the pod's node that holds its disk volumes (the kubelet's root dir). Each volume's own filesystem size (a memory volume's tmpfs) is emptydir_capacity_bytes, opt-in: "+optIn("emptydir_capacity_bytes", "emptydir_available_bytes")+".", units.BytesIEC, 12, 8,
			query(`max by (node) (emptydir_filesystem_capacity_bytes) and on (node) max by (node) (emptydir_used_bytes{`+nsPod+`, medium="disk"})`, "capacity"),
			query(`max by (node) (emptydir_filesystem_available_bytes) and on (node) max by (node) (emptydir_used_bytes{`+nsPod+`, medium="disk"})`, "available"),
			query(`max by (volume) (emptydir_capacity_bytes{`+nsPod+`})`, "{{volume}} filesystem size"))).
		WithPanel(timeseriesPanel("Inodes", "Files, directories and links in each volume. Opt-in: "+optIn("emptydir_inodes_used")+".", units.Short, 12, 8,
			query(`max by (volume) (emptydir_inodes_used{`+nsPod+`})`, "{{volume}}"))).
		WithPanel(timeseriesPanel("Unreadable entries", "Entries the exporter could not read: above 0, used bytes are a lower bound.", units.Short, 12, 7,
			query(`max by (volume) (emptydir_unreadable_entries{`+nsPod+`})`, "{{volume}}"))).
		WithPanel(timeseriesPanel("Measurement age", "Seconds between the measurement and the scrape. Opt-in: "+optIn("emptydir_measurement_age_seconds")+".", units.Seconds, 12, 7,
			query(`max by (volume) (emptydir_measurement_age_seconds{`+nsPod+`})`, "{{volume}}")))
	return podEphemeralStorage(b)
}

// The pod's ephemeral storage parts, in the order docs/metrics.md lists them (stacked so).
var podParts = []string{"emptydir", "writable_layer", "logs", "other"}

// podEphemeralStorage adds the row of the pod's and its containers' ephemeral storage
// (docs/metrics.md, "Pod and container ephemeral storage"): what counts toward each limit and
// how close it is. Container panels show every container of the pod.
func podEphemeralStorage(b *dashboard.DashboardBuilder) *dashboard.DashboardBuilder {
	const (
		// The pod's usage and limit (> 0: a limit of 0 is none) from the exporter's series.
		podUsedSel  = `emptydir_pod_ephemeral_storage_used_bytes{` + nsPod + `}`
		podLimitSel = `emptydir_pod_ephemeral_storage_limit_bytes{` + nsPod + `} > 0`
		podRatio    = `namespace_pod:emptydir_pod_ephemeral_storage_usage:ratio{` + nsPod + `}`
		ctrRatio    = `namespace_pod_container:emptydir_container_ephemeral_storage_usage:ratio{` + nsPod + `}`
	)
	ctrUsed, ctrLimit := containerUsed(nsPod), containerLimit(nsPod)
	parts := make([]*prometheus.DataqueryBuilder, 0, len(podParts)+3)
	for _, part := range podParts {
		parts = append(parts, query(`max(emptydir_pod_ephemeral_storage_part_bytes{`+nsPod+`, part="`+part+`"})`, part))
	}
	parts = append(parts,
		query(`max(`+podUsedSel+`)`, "used"),
		query(`max(`+podLimitSel+`)`, "limit"),
		query(`max(predict_linear(`+podUsedSel+`[30m], 3600) and on (node, namespace, pod, uid) (`+podLimitSel+`))`, "predicted in 1h"))
	return b.
		WithRow(row("Ephemeral storage (pod and container limits)")).
		WithPanel(statPanel("Pod usage / limit", "The pod's ephemeral storage against its ephemeral-storage limit (its containers' limits added up), as the kubelet compares them. Above 100% the pod is evicted (PodEphemeralStorageOverLimit). No value: no container of the pod has a limit, and no pod or container limit applies.", units.PercentUnit, 4, 4,
			steps("green", 0.9, "orange", 1.0, "red"), `max(`+podRatio+`)`)).
		WithPanel(statPanel("Pod used", "What counts toward the pod's limit: its disk emptyDir volumes, every running container's writable layer and logs, and other (configMap and gitRepo volumes, etc-hosts, the pod's own log files).", units.BytesIEC, 4, 4,
			steps("blue"), `max(`+podUsedSel+`)`)).
		WithPanel(statPanel("Pod limit", "The pod's ephemeral-storage limit: its containers' limits.ephemeral-storage added up, restartable init containers included.", units.BytesIEC, 4, 4,
			steps("blue"), `max(`+podLimitSel+`)`)).
		WithPanel(statPanel("Pod measurement", "lower bound: a part has no measurement yet, was read only in part, or is a writable layer not located (see \"Incomplete measurement, and why\"). A lower bound above the limit proves the pod over it; at or below it proves nothing.", units.Short, 4, 4,
			steps("green"), `max(emptydir_pod_ephemeral_storage_measurement_incomplete{`+nsPod+`}) or (max(`+podUsedSel+`) * 0)`).
			GraphMode(common.BigValueGraphModeNone).
			Mappings(mapping("complete", "green", "lower bound", "orange"))).
		WithPanel(statPanel("Pod measurement age", "Seconds since the oldest measurement behind the pod's usage started. With source filesystem every part counting toward a limit is due every --collection.interval, and more means walks deferred (CPU budget, busy walk slots) or slow, or a writable layer the kubelet's figure stands in for; with source kubelet it is as old as the kubelet's stats (1-2 minutes by design). Opt-in: "+optIn("emptydir_pod_ephemeral_storage_measurement_age_seconds")+".", units.Seconds, 4, 4,
			steps("green", 30.0, "orange"), `max(emptydir_pod_ephemeral_storage_measurement_age_seconds{`+nsPod+`})`)).
		WithPanel(statPanel("Image filesystem", "Whether containerd's writable layers are on another filesystem than the kubelet's root dir on the pod's node. shared: a container's writable layer counts toward its own limit and the pod's; dedicated: toward the pod's only, as in the kubelet.", units.Short, 4, 4,
			steps("blue"), `max by (node) (emptydir_exporter_image_filesystem_dedicated) and on (node) `+podUsedSel).
			GraphMode(common.BigValueGraphModeNone).
			Mappings(mapping("shared", "blue", "dedicated", "purple"))).
		WithPanel(timeseriesPanel("Pod usage by part vs limit", "What counts toward the pod's ephemeral-storage limit, stacked by part: emptydir (disk emptyDir volumes), writable_layer (every running container's), logs (every running container's), other (configMap and gitRepo volumes, etc-hosts, the pod's own log files). Their sum (used) against the limit (dashed) and the 1h prediction (dotted). The kubelet evicts above the limit. The parts are opt-in: "+optIn("emptydir_pod_ephemeral_storage_part_bytes")+".", units.BytesIEC, 24, 9,
			parts...).
			FillOpacity(40).
			Stacking(stackedNormal()).
			OverrideByName("used", []dashboard.DynamicConfigValue{seriesNotStacked, {Id: "custom.fillOpacity", Value: 0}, {Id: "color", Value: map[string]any{"mode": "fixed", "fixedColor": "text"}}}).
			OverrideByName("limit", append([]dashboard.DynamicConfigValue{seriesNotStacked}, limitLine...)).
			OverrideByName("predicted in 1h", append([]dashboard.DynamicConfigValue{seriesNotStacked}, dottedLine...))).
		WithPanel(timeseriesPanel("Usage / limit (pod and containers)", "The pod's usage against its limit, and each container's against its own (containers with a limit only). Above 100% the pod is evicted; the kubelet checks emptyDir sizeLimits first, then the pod's limit, then the containers'.", units.PercentUnit, 12, 8,
			query(podRatio, "pod"),
			query(ctrRatio, "container {{container}}")).
			Thresholds(ratioThresholds()).
			ThresholdsStyle(thresholdsDashed())).
		WithPanel(timeseriesPanel("Container usage vs limit", "Each running container's usage as the kubelet compares it with its limits.ephemeral-storage (solid): its logs, plus its writable layer unless the image filesystem is dedicated; its limit (dashed) and both parts (dotted; the writable layer whether it counts toward the container or not). emptyDir volumes never count toward a container. The parts are opt-in: "+optIn("emptydir_container_ephemeral_storage_part_bytes")+".", units.BytesIEC, 12, 8,
			query(ctrUsed, "{{container}} used"),
			query(ctrLimit, "{{container}} limit"),
			query(`max by (container, part) (emptydir_container_ephemeral_storage_part_bytes{`+nsPod+`})`, "{{container}} {{part}}")).
			OverrideByRegexp(".* limit$", limitLine).
			OverrideByRegexp(".* (writable_layer|logs)$", dottedLine)).
		WithPanel(limitTable("Containers now", "Each running container's usage, limit and parts now; used / limit and limit are empty for a container without a limit. The writable layer counts toward used unless the image filesystem is dedicated. The parts are opt-in: "+optIn("emptydir_container_ephemeral_storage_part_bytes")+".", 24, 6,
			[]string{"namespace", "pod", "container"},
			append(usageColumns(ctrUsed, ctrLimit, ctrRatio),
				column{"writable layer", units.BytesIEC, `max by (` + containerLabels + `) (emptydir_container_ephemeral_storage_part_bytes{` + nsPod + `, part="writable_layer"})`},
				column{"logs", units.BytesIEC, `max by (` + containerLabels + `) (emptydir_container_ephemeral_storage_part_bytes{` + nsPod + `, part="logs"})`}),
			[]string{"node", "uid"})).
		WithPanel(timeseriesPanel("Incomplete measurement, and why", "1 while the pod's usage is a lower bound, by reason: unmeasured (a part not measured yet), unlocated (a container's writable layer not located: reason other_runtime, no_rootfs_mount, not_overlay, outside_snapshotter, no_layer_record, bad_layer_metadata or no_layer_dir; it counts as the kubelet's own figure where the exporter may ask the kubelet, else as 0; that line is 0 when located), or a part read only in part (unreadable, changed_during_walk, cut_short), each disk emptyDir's own line beside it. A line at 0 (the pod's reads reason complete): measured completely. Measurable only as a lower bound for 10 minutes, a volume or pod with a limit raises EmptyDirMeasurementIncomplete.", units.Short, 12, 7,
			query(`max by (reason) (emptydir_pod_ephemeral_storage_measurement_incomplete{`+nsPod+`}) or label_replace(max(`+podUsedSel+`) * 0, "reason", "complete", "", "")`, "pod usage is a lower bound: {{reason}}"),
			query(`max by (container, reason) (emptydir_container_writable_layer_unlocated{`+nsPod+`}) or on (container) (max by (container) (emptydir_container_ephemeral_storage_used_bytes{`+nsPod+`}) * 0)`, "{{container}} writable layer not located {{reason}}"),
			query(`max by (volume, reason) (emptydir_measurement_incomplete{`+nsPod+`, medium="disk"}) or on (volume) (max by (volume) (emptydir_used_bytes{`+nsPod+`, medium="disk"}) * 0)`, "emptyDir {{volume}} is a lower bound: {{reason}}")).
			Min(0).Max(1)).
		WithPanel(timeseriesPanel("Ephemeral storage measurement age", "Seconds since the oldest measurement behind the pod's usage started (the emptyDir volumes' own ages are in \"Measurement age\" above). Opt-in: "+optIn("emptydir_pod_ephemeral_storage_measurement_age_seconds")+".", units.Seconds, 12, 7,
			query(`max(emptydir_pod_ephemeral_storage_measurement_age_seconds{`+nsPod+`})`, "pod (oldest part)"))).
		WithPanel(timeseriesPanel("Lower bound for how long", "Seconds since the pod's usage, or a disk emptyDir's, has been measurable only as a lower bound, at every measurement (the since series of \"Incomplete measurement, and why\"; a restarted exporter starts anew). The pod or a disk emptyDir measured completely stays at 0. The remediator evicts on it only with --policy.evict-incomplete-after.", units.Seconds, 24, 6,
			query(`time() - max(emptydir_pod_ephemeral_storage_measurement_incomplete_since_timestamp_seconds{`+nsPod+`}) or (max(`+podUsedSel+`) * 0)`, "pod usage"),
			query(`time() - max by (volume) (emptydir_measurement_incomplete_since_timestamp_seconds{`+nsPod+`, medium="disk"}) or on (volume) (max by (volume) (emptydir_used_bytes{`+nsPod+`, medium="disk"}) * 0)`, "emptyDir {{volume}}")))
}
