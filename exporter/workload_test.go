package exporter

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/emptydir-guard/emptydir-guard/exporter/volume"
)

// workloadPod is a pod named name controlled by kind/owner (none when kind is empty), with
// labels.
func workloadPod(name, apiVersion, kind, owner string, labels map[string]string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, UID: types.UID("uid-" + name), Labels: labels}}
	if kind != "" {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: owner, UID: "owner", Controller: ptr.To(true)}}
	}
	return p
}

func TestPodWorkload(t *testing.T) {
	hash := map[string]string{"pod-template-hash": "7d9f8c6b5"}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want volume.Workload
	}{
		{"Deployment: the ReplicaSet's name less its pods' hash", workloadPod("cart-7d9f8c6b5-x2x9z", "apps/v1", "ReplicaSet", "cart-7d9f8c6b5", hash), volume.Workload{Kind: "Deployment", Name: "cart"}},
		{"a ReplicaSet without the hash label is its own workload", workloadPod("rs-abcde", "apps/v1", "ReplicaSet", "rs", nil), volume.Workload{Kind: "ReplicaSet", Name: "rs"}},
		{"a hash that is not the ReplicaSet's suffix proves nothing", workloadPod("rs-abcde", "apps/v1", "ReplicaSet", "rs", hash), volume.Workload{Kind: "ReplicaSet", Name: "rs"}},
		{"a ReplicaSet named the hash alone", workloadPod("x", "apps/v1", "ReplicaSet", "-7d9f8c6b5", hash), volume.Workload{Kind: "ReplicaSet", Name: "-7d9f8c6b5"}},
		{"another API group's ReplicaSet is not the Deployment controller's", workloadPod("r-7d9f8c6b5-a", "example.com/v1", "ReplicaSet", "r-7d9f8c6b5", hash), volume.Workload{Kind: "ReplicaSet", Name: "r-7d9f8c6b5"}},
		{"StatefulSet", workloadPod("db-0", "apps/v1", "StatefulSet", "db", nil), volume.Workload{Kind: "StatefulSet", Name: "db"}},
		{"DaemonSet", workloadPod("agent-x", "apps/v1", "DaemonSet", "agent", nil), volume.Workload{Kind: "DaemonSet", Name: "agent"}},
		{"a CronJob's Job stays a Job", workloadPod("backup-29412345-abcde", "batch/v1", "Job", "backup-29412345", nil), volume.Workload{Kind: "Job", Name: "backup-29412345"}},
		{"another controller", workloadPod("w-1", "example.com/v1", "Workflow", "w", nil), volume.Workload{Kind: "Workflow", Name: "w"}},
		{"a bare pod is its own workload", workloadPod("debug", "", "", "", nil), volume.Workload{Kind: "Pod", Name: "debug"}},
		{"a static pod (controlled by its Node) is its own workload", workloadPod("etcd-node-1", "v1", "Node", "node-1", nil), volume.Workload{Kind: "Pod", Name: "etcd-node-1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := podWorkload(tc.pod); got != tc.want {
				t.Errorf("podWorkload = %+v, want %+v", got, tc.want)
			}
			// The informer keeps trimmed pods: the trim must keep what podWorkload reads.
			trimmed, err := trimPod(tc.pod.DeepCopy())
			if err != nil {
				t.Fatal(err)
			}
			if got := podWorkload(trimmed.(*corev1.Pod)); got != tc.want {
				t.Errorf("podWorkload of the trimmed pod = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestWorkloadInfoSeries: one series per measured pod, with the volumes collector only (the
// trigger scrape runs every few seconds and needs none of them).
func TestWorkloadInfoSeries(t *testing.T) {
	pod := workloadPod("cart-7d9f8c6b5-x2x9z", "apps/v1", "ReplicaSet", "cart-7d9f8c6b5", map[string]string{"pod-template-hash": "7d9f8c6b5"})
	pv, ok := podBase(pod)
	if !ok {
		t.Fatal("podBase refused the pod")
	}
	e := &Exporter{cfg: Config{NodeName: "node-1"}}
	snap := snapshot{workloads: podWorkloads([]volume.PodVolumes{pv})}
	collect := func(sel selection) []string {
		ch := make(chan prometheus.Metric, 10)
		e.collectWorkloads(ch, snap, sel)
		close(ch)
		var out []string
		for m := range ch {
			var d dto.Metric
			if err := m.Write(&d); err != nil {
				t.Fatal(err)
			}
			var labels []string
			for _, l := range d.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			out = append(out, fmt.Sprintf("%s %v", strings.Join(labels, " "), d.GetGauge().GetValue()))
		}
		return out
	}
	if got := collect(selectTrigger | selectEphemeralStorage | selectExporter); len(got) != 0 {
		t.Errorf("collectors other than volumes publish %s", got)
	}
	want := []string{"namespace=shop node=node-1 pod=cart-7d9f8c6b5-x2x9z uid=uid-cart-7d9f8c6b5-x2x9z workload=cart workload_kind=Deployment 1"}
	if got := collect(selectVolumes); !slices.Equal(got, want) {
		t.Errorf("published %q, want %q", got, want)
	}
}
