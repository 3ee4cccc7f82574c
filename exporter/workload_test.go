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

	"github.com/emptydir-guard/emptydir-guard/exporter/part"
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
		want part.Workload
	}{
		{"Deployment: the ReplicaSet's name less its pods' hash", workloadPod("cart-7d9f8c6b5-x2x9z", "apps/v1", "ReplicaSet", "cart-7d9f8c6b5", hash), part.Workload{Kind: "Deployment", Name: "cart"}},
		{"a ReplicaSet without the hash label is its own workload", workloadPod("rs-abcde", "apps/v1", "ReplicaSet", "rs", nil), part.Workload{Kind: "ReplicaSet", Name: "rs"}},
		{"a hash that is not the ReplicaSet's suffix proves nothing", workloadPod("rs-abcde", "apps/v1", "ReplicaSet", "rs", hash), part.Workload{Kind: "ReplicaSet", Name: "rs"}},
		{"a ReplicaSet named the hash alone (no valid name)", workloadPod("x", "apps/v1", "ReplicaSet", "-7d9f8c6b5", hash), part.Workload{Kind: "Pod", Name: "x", OwnerInvalid: "name"}},
		{"another API group's ReplicaSet is not the Deployment controller's", workloadPod("r-7d9f8c6b5-a", "example.com/v1", "ReplicaSet", "r-7d9f8c6b5", hash), part.Workload{Kind: "ReplicaSet", Name: "r-7d9f8c6b5"}},
		{"StatefulSet", workloadPod("db-0", "apps/v1", "StatefulSet", "db", nil), part.Workload{Kind: "StatefulSet", Name: "db"}},
		{"DaemonSet", workloadPod("agent-x", "apps/v1", "DaemonSet", "agent", nil), part.Workload{Kind: "DaemonSet", Name: "agent"}},
		{"a CronJob's Job stays a Job", workloadPod("backup-29412345-abcde", "batch/v1", "Job", "backup-29412345", nil), part.Workload{Kind: "Job", Name: "backup-29412345"}},
		{"another controller", workloadPod("w-1", "example.com/v1", "Workflow", "w", nil), part.Workload{Kind: "Workflow", Name: "w"}},
		{"a bare pod is its own workload", workloadPod("debug", "", "", "", nil), part.Workload{Kind: "Pod", Name: "debug"}},
		{"a static pod (controlled by its Node) is its own workload", workloadPod("etcd-node-1", "v1", "Node", "node-1", nil), part.Workload{Kind: "Pod", Name: "etcd-node-1"}},
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

// collectWorkloadSeries is what collectWorkloads publishes of the pods for sel, a line per
// series: its labels (name=value, sorted by name, the value %q-quoted) and its value.
func collectWorkloadSeries(t *testing.T, sel selection, pods ...*corev1.Pod) []string {
	t.Helper()
	var pvs []part.Pod
	for _, pod := range pods {
		pv, ok := podBase(pod)
		if !ok {
			t.Fatalf("podBase refused pod %q", pod.Name)
		}
		pvs = append(pvs, pv)
	}
	e := &Exporter{cfg: Config{NodeName: "node-1"}}
	ch := make(chan prometheus.Metric, 10+len(pods))
	e.collectWorkloads(ch, snapshot{workloads: podWorkloads(pvs)}, sel)
	close(ch)
	var out []string
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			t.Fatal(err)
		}
		var labels []string
		for _, l := range d.GetLabel() {
			labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
		}
		out = append(out, fmt.Sprintf("%s %v", strings.Join(labels, " "), d.GetGauge().GetValue()))
	}
	return out
}

// TestWorkloadInfoSeries: one series per measured pod, with the volumes collector only (the
// trigger scrape runs every few seconds and needs none of them).
func TestWorkloadInfoSeries(t *testing.T) {
	pod := workloadPod("cart-7d9f8c6b5-x2x9z", "apps/v1", "ReplicaSet", "cart-7d9f8c6b5", map[string]string{"pod-template-hash": "7d9f8c6b5"})
	if got := collectWorkloadSeries(t, selectTrigger|selectEphemeralStorage, pod); len(got) != 0 {
		t.Errorf("collectors other than volumes and the exporter's publish %s", got)
	}
	want := []string{`namespace="shop" node="node-1" pod="cart-7d9f8c6b5-x2x9z" uid="uid-cart-7d9f8c6b5-x2x9z" workload="cart" workload_kind="Deployment" 1`}
	if got := collectWorkloadSeries(t, selectVolumes, pod); !slices.Equal(got, want) {
		t.Errorf("published %q, want %q", got, want)
	}
}

// TestWorkloadOwnerInvalid: the API server takes any string as an ownerReference's kind and
// name, and a tenant's reaches tables and -o patch scripts (sh patches.sh runs a line
// "Deployment\ntouch /tmp/x\n#" as a command). A pod whose controller reference names no
// valid kind or object name is published as its own workload, and counted by reason.
func TestWorkloadOwnerInvalid(t *testing.T) {
	hash := map[string]string{"pod-template-hash": "7d9f8c6b5"}
	for _, tc := range []struct {
		name, kind, owner, reason string
	}{
		{"a newline and a command in the kind", "Deployment\ntouch /tmp/owned\n#", "web", "kind"},
		{"a command substitution in the kind", "ReplicaSet$(touch /tmp/owned)", "web-7d9f8c6b5", "kind"},
		{"backticks in the kind", "Job`id`", "backup", "kind"},
		{"a terminal escape in the kind", "\x1b[2J\x1b]0;owned\aStatefulSet", "db", "kind"},
		{"a quote in the kind", "Deploy'ment", "web", "kind"},
		{"a space in the kind", "Deployment web", "web", "kind"},
		{"a kind too long", "A" + strings.Repeat("b", 63), "web", "kind"},
		{"a Kelvin sign, which lower-cases to k", "\u212Aind", "web", "kind"},
		{"a carriage return in the name", "DaemonSet", "agent\rkubectl delete ns prod", "name"},
		{"a command substitution in the name", "StatefulSet", "db$(touch /tmp/owned)", "name"},
		{"a semicolon in the name", "Deployment", "web;touch /tmp/owned", "name"},
		{"backticks in the name", "Job", "`touch /tmp/owned`", "name"},
		{"quotes in the name", "Deployment", `web'"`, "name"},
		{"a terminal escape in the name", "ReplicaSet", "\x1b[31mweb-7d9f8c6b5", "name"},
		{"upper case in the name", "Deployment", "Web", "name"},
		{"a name too long", "Workflow", strings.Repeat("a", 254), "name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := workloadPod("victim-7d9f8c6b5-abcde", "apps/v1", tc.kind, tc.owner, hash)
			want := []string{
				`namespace="shop" node="node-1" pod="victim-7d9f8c6b5-abcde" uid="uid-victim-7d9f8c6b5-abcde" workload="victim-7d9f8c6b5-abcde" workload_kind="Pod" 1`,
				`node="node-1" reason="kind" ` + map[bool]string{true: "1", false: "0"}[tc.reason == "kind"],
				`node="node-1" reason="name" ` + map[bool]string{true: "1", false: "0"}[tc.reason == "name"],
			}
			if got := collectWorkloadSeries(t, selectVolumes|selectExporter, pod); !slices.Equal(got, want) {
				t.Errorf("published\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
	// Valid names pass, the longest included; a pod without a controller is no invalid one.
	valid := []*corev1.Pod{
		workloadPod("w-1", "example.com/v1", "Work-flow2", strings.Repeat("a", 253), nil),
		workloadPod("debug", "", "", "", nil),
	}
	want := []string{`node="node-1" reason="kind" 0`, `node="node-1" reason="name" 0`}
	if got := collectWorkloadSeries(t, selectExporter, valid...); !slices.Equal(got, want) {
		t.Errorf("valid owners: published %q, want %q", got, want)
	}
}
