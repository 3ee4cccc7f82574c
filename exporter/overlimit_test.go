package exporter_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/emptydir-guard/emptydir-guard/exporter"
	"github.com/emptydir-guard/emptydir-guard/exporter/exportertest"
	"github.com/emptydir-guard/emptydir-guard/exporter/part"
	"github.com/emptydir-guard/emptydir-guard/internal/noticeapi"
)

// overLimitExporter is an exporter over one pod with a disk or memory emptyDir "data" and a
// container "main" whose writable layer and logs are measured, with the given limits (nil:
// none) and usages; notices are the parts its cycle told Config.OverLimit of, crossed those its
// walks told Config.CrossedLimit of as they ended.
func overLimitExporter(t *testing.T, medium string, sizeLimit, podLimit, containerLimit *int64, data, layer, logs int64) (e *exporter.Exporter, notices, crossed []noticeapi.Notice) {
	t.Helper()
	var mu sync.Mutex
	const uid = "uid-p"
	pods := exportertest.NewPods(part.Pod{Namespace: "ns", Pod: "p", UID: uid,
		Parts: []part.Part{
			{Name: "data", Medium: medium, LimitBytes: sizeLimit, BudgetBytes: limit(1 << 30)},
			{Name: "container/main/writable-layer", Kind: part.KindWritableLayer, Container: "main", BudgetBytes: limit(1 << 30)},
			{Name: "container/main/logs", Kind: part.KindContainerLogs, Container: "main", BudgetBytes: limit(1 << 30)},
		},
		Storage: &part.PodStorage{LimitBytes: podLimit, Containers: []part.Container{
			{Name: "main", ID: "containerd://a", LimitBytes: containerLimit}}},
	})
	table := exportertest.NewTable()
	for name, used := range map[string]int64{"data": data, "container/main/writable-layer": layer, "container/main/logs": logs} {
		table.Set(uid, name, part.Measurement{UsedBytes: used, MeasuredAt: t0, CompletedAt: t0, Method: part.MethodWalk})
	}
	e, err := exporter.New(exporter.TestConfig(exporter.Config{NodeName: "node-1", Pods: pods,
		Source: exportertest.NewSource(table.Measure).Measurer(), Now: func() time.Time { return t0 },
		MeasureEphemeralStorage: podLimit != nil,
		OverLimit:               func(parts []noticeapi.Notice) { notices = parts },
		CrossedLimit: func(n noticeapi.Notice) {
			mu.Lock()
			defer mu.Unlock()
			if !slices.Contains(crossed, n) {
				crossed = append(crossed, n)
			}
		}}))
	if err != nil {
		t.Fatal(err)
	}
	e.Refresh(context.Background())
	mu.Lock()
	defer mu.Unlock()
	return e, notices, slices.Clone(crossed)
}

// noticeSeries is the over-limit series a notice stands for, as TestOverLimitSeries spells it.
func noticeSeries(n noticeapi.Notice) string {
	switch n.Check {
	case noticeapi.CheckEmptyDir:
		return fmt.Sprintf(`emptydir_over_limit_bytes{medium="disk",namespace=%q,node=%q,pod=%q,uid=%q,volume=%q}`, n.Namespace, n.Node, n.Pod, n.UID, n.Volume)
	case noticeapi.CheckPod:
		return fmt.Sprintf(`emptydir_pod_ephemeral_storage_over_limit_bytes{namespace=%q,node=%q,pod=%q,uid=%q}`, n.Namespace, n.Node, n.Pod, n.UID)
	default:
		return fmt.Sprintf(`emptydir_container_ephemeral_storage_over_limit_bytes{container=%q,namespace=%q,node=%q,pod=%q,uid=%q}`, n.Container, n.Namespace, n.Node, n.Pod, n.UID)
	}
}

// overLimitValues gathers c and returns its over-limit series as name{labels} → value.
func overLimitValues(t *testing.T, c prometheus.Collector) map[string]float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if !strings.HasSuffix(mf.GetName(), "_over_limit_bytes") {
			continue
		}
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			out[mf.GetName()+"{"+strings.Join(labels, ",")+"}"] = m.GetGauge().GetValue()
		}
	}
	return out
}

// TestOverLimitSeries: the over-limit series the alerts read exist exactly while a usage
// exceeds its limit, as the kubelet compares them (strictly greater; a limit of 0 is none),
// with the bytes over as value; never for a memory volume.
func TestOverLimitSeries(t *testing.T) {
	const mib = 1 << 20
	const (
		disk      = `emptydir_over_limit_bytes{medium="disk",namespace="ns",node="node-1",pod="p",uid="uid-p",volume="data"}`
		pod       = `emptydir_pod_ephemeral_storage_over_limit_bytes{namespace="ns",node="node-1",pod="p",uid="uid-p"}`
		container = `emptydir_container_ephemeral_storage_over_limit_bytes{container="main",namespace="ns",node="node-1",pod="p",uid="uid-p"}`
	)
	for _, tc := range []struct {
		name                           string
		medium                         string
		sizeLimit, podLimit, contLimit *int64
		data, layer, logs              int64
		want                           map[string]float64
	}{
		{name: "emptyDir under its limit", medium: part.MediumDisk, sizeLimit: limit(mib), data: mib - 4096},
		{name: "emptyDir at its limit", medium: part.MediumDisk, sizeLimit: limit(mib), data: mib},
		{name: "emptyDir over its limit", medium: part.MediumDisk, sizeLimit: limit(mib), data: mib + 4096,
			want: map[string]float64{disk: 4096}},
		{name: "emptyDir with a limit of 0", medium: part.MediumDisk, sizeLimit: limit(0), data: mib},
		{name: "emptyDir without a limit", medium: part.MediumDisk, data: 10 * mib},
		{name: "memory emptyDir over the limit in its spec", medium: part.MediumMemory, sizeLimit: limit(mib), data: 2 * mib},
		{name: "pod over its limit, container under its own", medium: part.MediumDisk,
			podLimit: limit(10 * mib), contLimit: limit(8 * mib), data: 5 * mib, layer: 4 * mib, logs: 2 * mib,
			want: map[string]float64{pod: mib}},
		{name: "container over its limit, pod under its own", medium: part.MediumDisk,
			podLimit: limit(10 * mib), contLimit: limit(2 * mib), data: mib, layer: 2 * mib, logs: 8192,
			want: map[string]float64{container: 8192}},
		{name: "container without a limit", medium: part.MediumDisk, podLimit: limit(10 * mib), layer: 9 * mib},
		// The kubelet's precedence (an emptyDir, then the pod, then a container), decided here
		// from the exporter's own measurements: the rules hold no trigger back on another
		// series, which any tenant could publish.
		{name: "everything over at once: the emptyDir's only", medium: part.MediumDisk, sizeLimit: limit(mib),
			podLimit: limit(4 * mib), contLimit: limit(2 * mib), data: 2 * mib, layer: 3 * mib,
			want: map[string]float64{disk: mib}},
		{name: "emptyDir and container over, pod under: the emptyDir's only", medium: part.MediumDisk, sizeLimit: limit(mib),
			podLimit: limit(40 * mib), contLimit: limit(2 * mib), data: 2 * mib, layer: 3 * mib,
			want: map[string]float64{disk: mib}},
		{name: "pod and container over, emptyDir under its limit: the pod's only", medium: part.MediumDisk, sizeLimit: limit(8 * mib),
			podLimit: limit(4 * mib), contLimit: limit(2 * mib), data: 2 * mib, layer: 3 * mib,
			want: map[string]float64{pod: mib}},
		{name: "memory emptyDir over its spec, pod over: the pod's", medium: part.MediumMemory, sizeLimit: limit(mib),
			podLimit: limit(2 * mib), data: 2 * mib, layer: 3 * mib,
			want: map[string]float64{pod: mib}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, notices, crossed := overLimitExporter(t, tc.medium, tc.sizeLimit, tc.podLimit, tc.contLimit, tc.data, tc.layer, tc.logs)
			got := overLimitValues(t, e.Collectors()[exporter.CollectorTrigger])
			// The remediator is told of the parts the series publish, no more, no fewer: at the
			// cycle's end, and as the walks end.
			if len(notices) != len(tc.want) {
				t.Errorf("notices %+v, want one per series of %v", notices, tc.want)
			}
			if len(crossed) != len(notices) {
				t.Errorf("walks told of %+v, the cycle's end of %+v: want the same parts", crossed, notices)
			}
			for _, n := range crossed {
				if !slices.Contains(notices, n) {
					t.Errorf("a walk told of %+v, which the cycle's end does not name (%+v)", n, notices)
				}
			}
			for _, n := range notices {
				if _, ok := tc.want[noticeSeries(n)]; !ok {
					t.Errorf("notice %+v: no such series in %v", n, tc.want)
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("over-limit series %v, want %v", got, tc.want)
			}
			for s, v := range tc.want {
				if got[s] != v {
					t.Errorf("%s = %v, want %v (all: %v)", s, got[s], v, got)
				}
			}
		})
	}
}
