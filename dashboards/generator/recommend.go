package main

import (
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/units"
)

// suggestionTable is an instant table of the recording rules' recommendations
// (docs/recommendations.md): one row per workload and volume or container (lead), the
// suggested values first, then the limit in force, the 7-day peak and 95th percentile and the
// history behind them, sorted by the first column. A row without a suggestion has too little
// history; one without a current value has no limit.
func suggestionTable(title, description string, w, h uint32, lead []string, cols []column) *table.PanelBuilder {
	return mergedTable(title, description, w, h, lead, cols, nil, []string{"Time", "namespace"}, func(c column) []dashboard.DynamicConfigValue {
		return []dashboard.DynamicConfigValue{{Id: "unit", Value: c.unit}}
	})
}

// suggestionColumns are the columns of a suggestionTable of the series recorded at level
// (namespace_workload_volume, namespace_workload_container) for the usage metric used: the
// suggested series first, the limit in force, then peak, 95th percentile and history.
func suggestionColumns(level, used, limit, history string, suggested []column) []column {
	sel := "{" + ns + "}"
	return append(suggested,
		column{"current limit", units.BytesIEC, level + ":" + limit + ":max" + sel},
		column{"peak 7d", units.BytesIEC, level + ":" + used + ":max7d" + sel},
		column{"p95 7d", units.BytesIEC, level + ":" + used + ":quantile95_7d" + sel},
		column{"history", units.Seconds, level + ":" + history + ":7d" + sel},
	)
}

// suggestedVolumeLimits and suggestedContainerLimits are the namespace dashboard's
// "suggested vs current limits".
func suggestedVolumeLimits() *table.PanelBuilder {
	const level = "namespace_workload_volume"
	return suggestionTable("Suggested vs current sizeLimits",
		"Per workload and disk emptyDir, from the last 7 days of its pods' usage (the largest pod at each 5 minutes): suggested sizeLimit = peak + 30 %, rounded up (docs/recommendations.md). Empty: under 24 hours of history. kubectl emptydir recommend prints the same, and patches.",
		24, 8, []string{"workload_kind", "workload", "volume"},
		suggestionColumns(level, "emptydir_used_bytes", "emptydir_limit_bytes", "emptydir_volume_recommendation_history_seconds",
			[]column{{"suggested sizeLimit", units.BytesIEC, level + ":emptydir_size_limit_bytes:suggested{" + ns + "}"}}))
}

func suggestedContainerLimits() *table.PanelBuilder {
	const level = "namespace_workload_container"
	return suggestionTable("Suggested vs current container ephemeral-storage",
		"Per workload and container (of pods with an ephemeral-storage limit: the exporter measures no others), from the last 7 days: suggested limit = peak + 30 %, request = 95th percentile, rounded up (docs/recommendations.md). Empty: under 24 hours of history. The pod's containers' limits must also add up to what the pod uses with its emptyDirs: kubectl emptydir recommend raises one where they do not.",
		24, 8, []string{"workload_kind", "workload", "container"},
		suggestionColumns(level, "emptydir_container_ephemeral_storage_used_bytes", "emptydir_container_ephemeral_storage_limit_bytes", "emptydir_container_recommendation_history_seconds",
			[]column{
				{"suggested limit", units.BytesIEC, level + ":emptydir_container_ephemeral_storage_limit_bytes:suggested{" + ns + "}"},
				{"suggested request", units.BytesIEC, level + ":emptydir_container_ephemeral_storage_request_bytes:suggested{" + ns + "}"},
			}))
}
