package exporter

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/emptydir-guard/emptydir-guard/exporter/part"
	"github.com/emptydir-guard/emptydir-guard/internal/kubename"
)

// The reasons a controller reference is not taken for the pod's workload
// (emptydir_exporter_pods_owner_invalid).
const (
	ownerInvalidKind = "kind"
	ownerInvalidName = "name"
)

// podWorkload is the workload of p from its controller reference alone, without a request
// to the API server: a ReplicaSet whose name is its pods' pod-template-hash label appended
// to another name was made by the Deployment of that name (the Deployment controller names
// its ReplicaSets so, and sets the label on their pods). A Job stays a Job: whether a
// CronJob made it is on the Job, not on its pods (a name ending in a number is no proof).
//
// The API server does not validate an ownerReference's kind and name, and they reach tables,
// dashboards and -o patch scripts: a pod whose reference names no valid kind or object name
// is its own workload, and OwnerInvalid says which.
func podWorkload(p *corev1.Pod) part.Workload {
	ref := metav1.GetControllerOfNoCopy(p)
	if ref == nil || ref.Kind == "Node" {
		return part.Workload{Kind: "Pod", Name: p.Name}
	}
	switch {
	case !kubename.IsKind(ref.Kind):
		return part.Workload{Kind: "Pod", Name: p.Name, OwnerInvalid: ownerInvalidKind}
	case !kubename.IsObjectName(ref.Name):
		return part.Workload{Kind: "Pod", Name: p.Name, OwnerInvalid: ownerInvalidName}
	}
	if ref.Kind == "ReplicaSet" && strings.HasPrefix(ref.APIVersion, "apps/") {
		if hash := p.Labels[appsv1.DefaultDeploymentUniqueLabelKey]; hash != "" {
			if name, ok := strings.CutSuffix(ref.Name, "-"+hash); ok && kubename.IsObjectName(name) {
				return part.Workload{Kind: "Deployment", Name: name}
			}
		}
	}
	return part.Workload{Kind: ref.Kind, Name: ref.Name}
}

var (
	workloadInfoDesc = newDesc("emptydir_pod_workload_info",
		"The workload the pod belongs to, from its controller reference; always 1.",
		append(podLabels, "workload_kind", "workload"), nil)
	ownerInvalidDesc = newDesc("emptydir_exporter_pods_owner_invalid",
		"Pods counted as their own workload because their controller reference is invalid, by reason.",
		[]string{"node", "reason"}, nil)
)

// collectWorkloads publishes one workload info series per pod the exporter measures (with the
// volumes collector: it changes only with the pod), and how many of those pods are their own
// workload for an invalid controller reference (with the exporter's).
func (e *Exporter) collectWorkloads(ch chan<- prometheus.Metric, snap snapshot, sel selection) {
	if sel&selectVolumes != 0 && !e.hidden[workloadInfoDesc] {
		for _, p := range snap.workloads {
			ch <- prometheus.MustNewConstMetric(workloadInfoDesc, prometheus.GaugeValue, 1,
				e.cfg.NodeName, p.Namespace, p.Pod, p.UID, p.Workload.Kind, p.Workload.Name)
		}
	}
	if sel&selectExporter != 0 {
		invalid := map[string]int{}
		for _, p := range snap.workloads {
			invalid[p.Workload.OwnerInvalid]++
		}
		for _, reason := range []string{ownerInvalidKind, ownerInvalidName} {
			ch <- prometheus.MustNewConstMetric(ownerInvalidDesc, prometheus.GaugeValue, float64(invalid[reason]), e.cfg.NodeName, reason)
		}
	}
}

// podWorkloads keeps of pods what collectWorkloads publishes.
func podWorkloads(pods []part.Pod) []part.Pod {
	out := make([]part.Pod, 0, len(pods))
	for _, p := range pods {
		if p.Workload.Kind != "" {
			out = append(out, part.Pod{Namespace: p.Namespace, Pod: p.Pod, UID: p.UID, Workload: p.Workload})
		}
	}
	return out
}
