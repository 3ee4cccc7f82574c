package calibrate

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestCollectorGolden: the layout as one info series, one series per mismatch and per skipped
// check, and the time of the calibration; nothing before the first.
func TestCollectorGolden(t *testing.T) {
	r := Result{
		Layout: Layout{KubeletRootDir: "/var/lib/k0s/kubelet", PodLogsDir: "/var/log/pods", CgroupVersion: "1",
			CgroupDriver: "cgroupfs", CgroupRoot: "/", ContainerdSnapshotterRoot: "/var/lib/k0s/containerd/io.containerd.snapshotter.v1.overlayfs",
			ContainerRuntime: "containerd"},
		Mismatches: []Mismatch{
			{Setting: SettingKubeletRootDir, Reason: ReasonOwnPodNotFound, Found: "/var/lib/k0s/kubelet", Err: errors.New("not there")},
			{Setting: SettingSnapshotterRoot, Reason: "outside_snapshotter", Found: "/var/lib/k0s/containerd/io.containerd.snapshotter.v1.overlayfs"},
		},
		Skipped: []Skip{{SettingCgroupRoot, SkipNotConfigured}},
	}
	c := New("node-1", func() Result { return r }, slog.New(slog.DiscardHandler))
	c.now = func() time.Time { return time.Unix(1700000000, 500e6) }
	if n := testutil.CollectAndCount(c); n != 0 {
		t.Errorf("before the first calibration: %d series, want none", n)
	}
	c.Calibrate()
	const want = `
# HELP emptydir_exporter_layout_check_skipped 1 for each setting of the node's layout that calibration did not check, and why.
# TYPE emptydir_exporter_layout_check_skipped gauge
emptydir_exporter_layout_check_skipped{node="node-1",reason="not_configured",setting="cgroup.root"} 1
# HELP emptydir_exporter_layout_check_timestamp_seconds Unix time in seconds of the last calibration of the node's layout.
# TYPE emptydir_exporter_layout_check_timestamp_seconds gauge
emptydir_exporter_layout_check_timestamp_seconds{node="node-1"} 1.7000000005e+09
# HELP emptydir_exporter_layout_info The node's layout as found on the exporter's own pod; always 1.
# TYPE emptydir_exporter_layout_info gauge
emptydir_exporter_layout_info{cgroup_driver="cgroupfs",cgroup_root="/",cgroup_version="1",container_runtime="containerd",containerd_snapshotter_root="/var/lib/k0s/containerd/io.containerd.snapshotter.v1.overlayfs",containerd_task_dir="",crio_storage_root="",docker_root="",kubelet_root_dir="/var/lib/k0s/kubelet",node="node-1",pod_logs_dir="/var/log/pods"} 1
# HELP emptydir_exporter_layout_mismatch 1 for each layout setting the exporter's own pod contradicts, with the value found.
# TYPE emptydir_exporter_layout_mismatch gauge
emptydir_exporter_layout_mismatch{found="/var/lib/k0s/containerd/io.containerd.snapshotter.v1.overlayfs",node="node-1",reason="outside_snapshotter",setting="containerd.snapshotter-root"} 1
emptydir_exporter_layout_mismatch{found="/var/lib/k0s/kubelet",node="node-1",reason="own_pod_not_found",setting="kubelet.root-dir"} 1
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

// TestCalibrateLogsChanges: the layout is logged at the first calibration and when it changes,
// not at every one.
func TestCalibrateLogsChanges(t *testing.T) {
	var buf bytes.Buffer
	results := []Result{
		{Layout: Layout{CgroupRoot: "/"}},
		{Layout: Layout{CgroupRoot: "/"}},
		{Layout: Layout{CgroupRoot: "/"}, Mismatches: []Mismatch{{Setting: SettingPodLogsDir, Reason: ReasonOwnPodNotFound, Err: errors.New("gone")}}},
		{Layout: Layout{CgroupRoot: "/"}, Mismatches: []Mismatch{{Setting: SettingPodLogsDir, Reason: ReasonOwnPodNotFound, Err: errors.New("gone")}}},
	}
	i := 0
	c := New("node-1", func() Result { i++; return results[i-1] }, slog.New(slog.NewTextHandler(&buf, nil)))
	for range results {
		c.Calibrate()
	}
	if got := strings.Count(buf.String(), "node layout found"); got != 2 {
		t.Errorf("the layout logged %d times, want 2 (first, then changed):\n%s", got, buf.String())
	}
	if got := strings.Count(buf.String(), "does not match"); got != 1 || !strings.Contains(buf.String(), "setting=kubelet.pod-logs-dir reason=own_pod_not_found") {
		t.Errorf("the mismatch logged %d times, want once with its setting and reason:\n%s", got, buf.String())
	}
}
