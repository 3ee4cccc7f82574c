package recommend

import (
	"strconv"
	"strings"

	"github.com/prometheus/common/model"
)

// The pooled series, one point per Step: the recording rules record them under these names
// (rules/emptydir-guard.rules.yml, group emptydir-guard.recommendations, interval Step) with
// the expressions stepExpr builds; TestRulesRecordStepExprs keeps the two the same.
const (
	VolumeStepSeries    = "namespace_workload_volume:emptydir_used_bytes:max5m"
	ContainerStepSeries = "namespace_workload_container:emptydir_container_ephemeral_storage_used_bytes:max5m"
	PodStepSeries       = "namespace_workload:emptydir_pod_ephemeral_storage_used_bytes:max5m"
)

// WorkloadInfo is the exporter's series naming each pod's workload (exporter/workload.go).
const WorkloadInfo = "emptydir_pod_workload_info"

// series is what each Kind reads: the exporter's usage and limit series, the labels that
// name a target beside the workload's, the selector's fixed matchers and the step series.
type series struct {
	used, limit, label, matchers, step string
}

var kinds = map[Kind]series{
	KindVolume: {used: "emptydir_used_bytes", limit: "emptydir_limit_bytes", label: "volume",
		// Memory volumes count toward the pod's memory, not its ephemeral storage, and their
		// limit in force is their tmpfs size: no sizeLimit is suggested for them.
		matchers: `medium="disk"`, step: VolumeStepSeries},
	KindContainer: {used: "emptydir_container_ephemeral_storage_used_bytes",
		limit: "emptydir_container_ephemeral_storage_limit_bytes", label: "container", step: ContainerStepSeries},
	KindPod: {used: "emptydir_pod_ephemeral_storage_used_bytes",
		limit: "emptydir_pod_ephemeral_storage_limit_bytes", step: PodStepSeries},
}

// by is the labels a Kind's targets are told apart by.
func (s series) by() string {
	if s.label == "" {
		return "namespace, workload_kind, workload"
	}
	return "namespace, workload_kind, workload, " + s.label
}

// perPod is the labels of one pod's series of the Kind: the exporter's, less the scrape's.
func (s series) perPod() string {
	if s.label == "" {
		return "namespace, uid"
	}
	return "namespace, uid, " + s.label
}

// Filter narrows the workloads read; empty fields match all.
type Filter struct {
	Namespace, WorkloadKind, Workload string
}

// matchers are the label matchers of f on series that carry the labels named: the exporter's
// carry namespace only, the workload info and the step series the workload's too.
func (f Filter) matchers(workloadLabels bool) []string {
	var m []string
	add := func(label, value string) {
		if value != "" {
			m = append(m, label+"="+strconv.Quote(value))
		}
	}
	add("namespace", f.Namespace)
	if workloadLabels {
		add("workload_kind", f.WorkloadKind)
		add("workload", f.Workload)
	}
	return m
}

// selector is metric{matchers...}.
func selector(metric string, matchers ...string) string {
	var m []string
	for _, s := range matchers {
		if s != "" {
			m = append(m, s)
		}
	}
	if len(m) == 0 {
		return metric
	}
	return metric + "{" + strings.Join(m, ", ") + "}"
}

// workloadJoin is the right-hand side that names each pod's workload, over the step: a pod
// deleted within it has a stale marker at the instant but its usage still in the step. A pod
// that two workloads claim is left out: anyone can publish emptydir_pod_workload_info with
// another pod's uid into a shared Prometheus, and a join with two right-hand series for one
// pod fails the whole query, every namespace's recommendations with it.
func workloadJoin(f Filter, step string) string {
	info := "max by (namespace, uid, workload_kind, workload) (max_over_time(" +
		selector(WorkloadInfo, f.matchers(true)...) + "[" + step + "]))"
	return "(" + info + " unless on (namespace, uid) (count by (namespace, uid) (" + info + ") > 1))"
}

// stepExpr is one point of the Kind's pooled series at an evaluation time: each pod's
// largest usage within the step, joined to its workload by uid, the largest across the
// workload's pods. The recording rules record stepExpr(k, Filter{}, "5m") every Step.
func stepExpr(k Kind, f Filter, step string) string {
	s := kinds[k]
	used := selector(s.used, append([]string{s.matchers}, f.matchers(false)...)...)
	return "max by (" + s.by() + ") (" +
		"max by (" + s.perPod() + ") (max_over_time(" + used + "[" + step + "]))" +
		" * on (namespace, uid) group_left (workload_kind, workload) " +
		workloadJoin(f, step) + ")"
}

// currentExpr is the largest limit in force among each workload's pods now.
func currentExpr(k Kind, f Filter) string {
	s := kinds[k]
	limit := selector(s.limit, append([]string{s.matchers}, f.matchers(false)...)...)
	return "max by (" + s.by() + ") (" +
		"max by (" + s.perPod() + ") (" + limit + " > 0)" +
		" * on (namespace, uid) group_left (workload_kind, workload) " +
		workloadJoin(f, model.Duration(Step).String()) + ")"
}

// podsExpr counts each workload's pods measured over window.
func podsExpr(f Filter, window string) string {
	return "count by (namespace, workload_kind, workload) (count by (namespace, workload_kind, workload, uid) (" +
		"max_over_time(" + selector(WorkloadInfo, f.matchers(true)...) + "[" + window + "])))"
}

// StepExpr is stepExpr for the rules' generator and tests.
func StepExpr(k Kind) string { return stepExpr(k, Filter{}, model.Duration(Step).String()) }

// CurrentExpr is currentExpr for the rules' generator and tests.
func CurrentExpr(k Kind) string { return currentExpr(k, Filter{}) }

// RoundExpr is Round in PromQL, of the expression x, with the same float operations in the
// same order (math.Max, Log2, Floor, Pow, Ceil), so that both give the same bytes: the
// recording rules' suggestions are RoundExpr of the peak × (1 + Headroom) and of the
// quantile.
func RoundExpr(x string) string {
	c := "clamp_min(" + x + ", " + strconv.Itoa(MinBytes) + ")"
	q := "2 ^ (floor(log2(" + c + ")) - 2)"
	return q + " * ceil(" + c + " / " + q + ")"
}
