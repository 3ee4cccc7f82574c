package calibrate

import (
	"context"
	"log/slog"
	"reflect"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Interval is how often the exporter calibrates: a node's layout changes only with its kubelet's
// or runtime's configuration, and an alert waits longer than this.
const Interval = 10 * time.Minute

var (
	layoutInfoDesc = prometheus.NewDesc("emptydir_exporter_layout_info",
		"The node's layout as found on the exporter's own pod; always 1.",
		[]string{"node", "kubelet_root_dir", "pod_logs_dir", "cgroup_version", "cgroup_driver", "cgroup_root", "containerd_task_dir", "containerd_snapshotter_root",
			"container_runtime", "crio_storage_root", "docker_root"}, nil)
	layoutMismatchDesc = prometheus.NewDesc("emptydir_exporter_layout_mismatch",
		"1 for each layout setting the exporter's own pod contradicts, with the value found.",
		[]string{"node", "setting", "reason", "found"}, nil)
	layoutSkippedDesc = prometheus.NewDesc("emptydir_exporter_layout_check_skipped",
		"1 for each setting of the node's layout that calibration did not check, and why.",
		[]string{"node", "setting", "reason"}, nil)
	layoutTimestampDesc = prometheus.NewDesc("emptydir_exporter_layout_check_timestamp_seconds",
		"Unix time in seconds of the last calibration of the node's layout.",
		[]string{"node"}, nil)
)

// Calibrator runs a check of the node's layout, logs what changed and publishes the last
// result (a prometheus.Collector).
type Calibrator struct {
	node   string
	check  func() Result
	logger *slog.Logger
	now    func() time.Time

	mu     sync.Mutex
	result *Result
	at     time.Time
}

// New calibrates with check, on node, logging to logger.
func New(node string, check func() Result, logger *slog.Logger) *Calibrator {
	return &Calibrator{node: node, check: check, logger: logger, now: time.Now}
}

// Calibrate checks once, publishes the result and logs it when it differs from the last one.
func (c *Calibrator) Calibrate() Result {
	r := c.check()
	at := c.now()
	c.mu.Lock()
	changed := c.result == nil || !sameResult(*c.result, r)
	c.result, c.at = &r, at
	c.mu.Unlock()
	if changed {
		c.log(r)
	}
	return r
}

// Run calibrates every interval until ctx ends.
func (c *Calibrator) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.Calibrate()
		}
	}
}

func (c *Calibrator) log(r Result) {
	l := r.Layout
	skipped := make([]string, 0, len(r.Skipped))
	for _, s := range r.Skipped {
		skipped = append(skipped, s.Setting+"="+s.Reason)
	}
	c.logger.Info("node layout found on the exporter's own pod", "kubelet_root_dir", l.KubeletRootDir, "pod_logs_dir", l.PodLogsDir,
		"cgroup_version", l.CgroupVersion, "cgroup_driver", l.CgroupDriver, "cgroup_root", l.CgroupRoot,
		"containerd_task_dir", l.ContainerdTaskDir, "containerd_snapshotter_root", l.ContainerdSnapshotterRoot,
		"container_runtime", l.ContainerRuntime, "crio_storage_root", l.CRIOStorageRoot, "docker_root", l.DockerRoot,
		"mismatches", len(r.Mismatches), "skipped", skipped)
	for _, m := range r.Mismatches {
		c.logger.Warn("a setting of the node's layout does not match the exporter's own pod (docs/deploy.md, Calibration)",
			"setting", m.Setting, "reason", m.Reason, "found", m.Found, "err", m.Err)
	}
}

// sameResult compares what is published and logged, errors by their text.
func sameResult(a, b Result) bool {
	text := func(ms []Mismatch) []string {
		var s []string
		for _, m := range ms {
			s = append(s, m.Setting, m.Reason, m.Found, errText(m.Err))
		}
		return s
	}
	return a.Layout == b.Layout && reflect.DeepEqual(a.Skipped, b.Skipped) && reflect.DeepEqual(text(a.Mismatches), text(b.Mismatches))
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// Describe implements prometheus.Collector.
func (c *Calibrator) Describe(ch chan<- *prometheus.Desc) {
	ch <- layoutInfoDesc
	ch <- layoutMismatchDesc
	ch <- layoutSkippedDesc
	ch <- layoutTimestampDesc
}

// Collect implements prometheus.Collector: nothing before the first calibration.
func (c *Calibrator) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	r, at := c.result, c.at
	c.mu.Unlock()
	if r == nil {
		return
	}
	l := r.Layout
	ch <- prometheus.MustNewConstMetric(layoutInfoDesc, prometheus.GaugeValue, 1, c.node, l.KubeletRootDir, l.PodLogsDir,
		l.CgroupVersion, l.CgroupDriver, l.CgroupRoot, l.ContainerdTaskDir, l.ContainerdSnapshotterRoot,
		l.ContainerRuntime, l.CRIOStorageRoot, l.DockerRoot)
	for _, m := range r.Mismatches {
		ch <- prometheus.MustNewConstMetric(layoutMismatchDesc, prometheus.GaugeValue, 1, c.node, m.Setting, m.Reason, m.Found)
	}
	for _, s := range r.Skipped {
		ch <- prometheus.MustNewConstMetric(layoutSkippedDesc, prometheus.GaugeValue, 1, c.node, s.Setting, s.Reason)
	}
	ch <- prometheus.MustNewConstMetric(layoutTimestampDesc, prometheus.GaugeValue, float64(at.UnixNano())/1e9, c.node)
}
