package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"

	"github.com/emptydir-guard/emptydir-guard/internal/podcgroup"
	"github.com/emptydir-guard/emptydir-guard/test/cluster"
	"github.com/emptydir-guard/emptydir-guard/test/framework"
)

// checkLayout scrapes the exporter pod and checks the calibration on its own pod: the layout
// it found is this cluster's (kubelet root from the mount table, pod logs, cgroup root and
// driver found in the cgroup tree, containerd's directories from its own writable layer), and its
// mismatches are exactly want ("setting reason found" each).
func checkLayout(ctx context.Context, t *testing.T, c *cluster.Cluster, pod *corev1.Pod, want ...string) {
	t.Helper()
	checkLayoutFound(ctx, t, c, pod, nil, want...)
}

// checkLayoutFound is checkLayout where the exporter's values send it to look elsewhere than
// the cluster's layout: found overrides labels of the layout it must find ("" where the
// check finds nothing).
func checkLayoutFound(ctx context.Context, t *testing.T, c *cluster.Cluster, pod *corev1.Pod, found map[string]string, want ...string) {
	t.Helper()
	fams, err := framework.Scrape(ctx, c, deployExporterURL(pod)+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	version := "1"
	if l, err := podcgroup.Open(podcgroup.Config{Mount: "/sys/fs/cgroup", Root: "/"}); err == nil && l.Version() == podcgroup.V2 {
		version = "2"
	}
	layout := map[string]string{"kubelet_root_dir": c.KubeletRootDir(), "pod_logs_dir": c.PodLogsDir(),
		"cgroup_version": version, "cgroup_driver": "cgroupfs", "cgroup_root": c.CgroupRoot(),
		"containerd_task_dir": c.ContainerdTaskDir(), "containerd_snapshotter_root": c.SnapshotterRoot(),
		"container_runtime": "containerd", "crio_storage_root": "", "docker_root": ""}
	maps.Copy(layout, found)
	if v, ok := framework.Sample(fams, "emptydir_exporter_layout_info", layout); !ok || v != 1 {
		t.Errorf("emptydir_exporter_layout_info: %v, want one series 1 with %v", familySeries(fams["emptydir_exporter_layout_info"]), layout)
	}
	var got []string
	for _, m := range fams["emptydir_exporter_layout_mismatch"].GetMetric() {
		l := metricLabels(m)
		got = append(got, l["setting"]+" "+l["reason"]+" "+l["found"])
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("emptydir_exporter_layout_mismatch: %q, want %q (skipped: %v)", got, want, familySeries(fams["emptydir_exporter_layout_check_skipped"]))
	}
}

func metricLabels(m *dto.Metric) map[string]string {
	l := map[string]string{}
	for _, p := range m.GetLabel() {
		l[p.GetName()] = p.GetValue()
	}
	return l
}

func familySeries(mf *dto.MetricFamily) string {
	var s []string
	for _, m := range mf.GetMetric() {
		s = append(s, fmt.Sprint(metricLabels(m)))
	}
	return strings.Join(s, "; ")
}
