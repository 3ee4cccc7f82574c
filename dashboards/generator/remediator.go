package main

import (
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/units"
)

func remediatorDashboard() *dashboard.DashboardBuilder {
	return newDashboard(uidRemediator, "emptyDir guard / Remediator",
		"What emptydir-remediator did with the remediation alerts it received (EmptyDirOverLimit, PodEphemeralStorageOverLimit, ContainerEphemeralStorageOverLimit).").
		WithRow(row("Activity")).
		WithPanel(statPanel("Evicted", "Pods evicted in the selected time range.", units.Short, 6, 4,
			steps("blue"), `sum(increase(emptydir_remediator_evictions_total{result="evicted"}[$__range])) or vector(0)`)).
		WithPanel(statPanel("Eviction errors", "Eviction API calls that failed in the selected time range.", units.Short, 6, 4,
			steps("green", 1.0, "red"), `sum(increase(emptydir_remediator_evictions_total{result="error"}[$__range])) or vector(0)`)).
		WithPanel(statPanel("Blocked by PDB", "Evictions refused because of a PodDisruptionBudget in the selected time range.", units.Short, 6, 4,
			steps("green", 1.0, "orange"), `sum(increase(emptydir_remediator_evictions_total{result="pdb_blocked"}[$__range])) or vector(0)`)).
		WithPanel(statPanel("Leaders", "Replicas holding the lease: exactly 1 is healthy.", units.Short, 6, 4,
			steps("red", 1.0, "green", 2.0, "red"), `sum(emptydir_remediator_is_leader) or vector(0)`)).
		WithPanel(timeseriesPanel("Evictions by result", "Eviction API calls per second.", units.Short, 12, 8,
			query(`sum by (result) (rate(emptydir_remediator_evictions_total[$__rate_interval]))`, "{{result}}"))).
		WithPanel(timeseriesPanel("Alerts by outcome", "Alerts handled per second, by what came of them.", units.Short, 12, 8,
			query(`sum by (outcome) (rate(emptydir_remediator_alerts_total[$__rate_interval]))`, "{{outcome}}"))).
		WithPanel(timeseriesPanel("Skips by reason", "Alerts that policy or the live re-check declined, per second.", units.Short, 12, 8,
			query(`sum by (reason) (rate(emptydir_remediator_skips_total[$__rate_interval]))`, "{{reason}}"))).
		WithPanel(timeseriesPanel("Live re-check errors", "Live measurements that failed, per second.", units.Short, 12, 8,
			query(`sum by (reason) (rate(emptydir_remediator_live_measurement_errors_total[$__rate_interval]))`, "{{reason}}"))).
		WithPanel(timeseriesPanel("Over their limits, by check", "What the remediation triggers read, the exporters' over-limit series: emptyDir volumes other than medium Memory over their sizeLimit (EmptyDirOverLimit, check emptydir), pods over their ephemeral-storage limit (PodEphemeralStorageOverLimit, check pod), containers over their limits.ephemeral-storage (ContainerEphemeralStorageOverLimit, check container). A pod over several limits counts under each; its alerts follow the kubelet's order and raise the first only. The remediator's own counters carry no check label.", units.Short, 24, 7,
			query(volumesOverLimit, "emptydir"),
			query(podsOverLimit, "pod"),
			query(containersOverLimit, "container"))).
		WithRow(row("Webhook")).
		WithPanel(timeseriesPanel("Webhook requests by code", "4xx are not retried by Alertmanager (EmptyDirRemediatorWebhookRejected).", units.Short, 12, 8,
			query(`sum by (code) (rate(emptydir_remediator_webhook_requests_total[$__rate_interval]))`, "{{code}}"))).
		WithPanel(timeseriesPanel("Webhook latency", "Time to handle one webhook request.", units.Seconds, 12, 8,
			query(`histogram_quantile(0.5, sum by (le) (rate(emptydir_remediator_webhook_duration_seconds_bucket[$__rate_interval])))`, "p50"),
			query(`histogram_quantile(0.9, sum by (le) (rate(emptydir_remediator_webhook_duration_seconds_bucket[$__rate_interval])))`, "p90"),
			query(`histogram_quantile(0.99, sum by (le) (rate(emptydir_remediator_webhook_duration_seconds_bucket[$__rate_interval])))`, "p99"),
			query(`sum(rate(emptydir_remediator_webhook_duration_seconds_sum[$__rate_interval])) / sum(rate(emptydir_remediator_webhook_duration_seconds_count[$__rate_interval]))`, "mean"))).
		WithPanel(timeseriesPanel("Live re-check latency", "Time to get the live measurement from the exporter.", units.Seconds, 12, 8,
			query(`histogram_quantile(0.5, sum by (le) (rate(emptydir_remediator_live_measurement_duration_seconds_bucket[$__rate_interval])))`, "p50"),
			query(`histogram_quantile(0.99, sum by (le) (rate(emptydir_remediator_live_measurement_duration_seconds_bucket[$__rate_interval])))`, "p99"))).
		WithPanel(timeseriesPanel("Leader", "1 on the replica that holds the lease.", units.Short, 12, 8,
			query(`max by (instance) (emptydir_remediator_is_leader{`+remediatorJob+`})`, "{{instance}}")).Min(0).Max(1)).
		WithPanel(timeseriesPanel("Remediator up and versions", "", units.Short, 24, 6,
			query(`up{`+remediatorJob+`}`, "up {{instance}}"),
			query(`count by (version, revision, goversion) (emptydir_remediator_build_info)`, "{{version}} {{revision}} {{goversion}}")))
}
