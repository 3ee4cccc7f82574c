package exporter_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/emptydir-guard/emptydir-guard/exporter"
	"github.com/emptydir-guard/emptydir-guard/exporter/exportertest"
	"github.com/emptydir-guard/emptydir-guard/exporter/part"
	"github.com/emptydir-guard/emptydir-guard/internal/logwatch"
	"github.com/emptydir-guard/emptydir-guard/internal/noticeapi"
)

// withLogDirs is a walked source that says where containers' logs are, as source.Filesystem.
type withLogDirs struct{ part.Measurer }

func (withLogDirs) LogDir(p part.Pod, container string) string {
	return "/var/log/pods/" + p.Namespace + "_" + p.Pod + "_" + p.UID + "/" + container
}

// watchedDirs records what the exporter hands its log watch.
type watchedDirs struct {
	mu   sync.Mutex
	dirs map[string]logwatch.Pod
}

func (w *watchedDirs) Watch(dirs map[string]logwatch.Pod) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.dirs = dirs
}

// TestLogsMeasuredWhenWritten: each cycle hands the log watch the log directories of the pods with
// a limit, and only those; a write there measures the pod's logs at once, without a cycle, and
// a container its logs put over its limit is noticed then.
func TestLogsMeasuredWhenWritten(t *testing.T) {
	const uid = "uid-p"
	limited := part.Pod{Namespace: "ns", Pod: "p", UID: uid,
		Parts: []part.Part{
			{Name: "container/main/writable-layer", Kind: part.KindWritableLayer, Container: "main", BudgetBytes: limit(2 << 20)},
			{Name: "container/main/logs", Kind: part.KindContainerLogs, Container: "main", BudgetBytes: limit(2 << 20)},
		},
		Storage: &part.PodStorage{Containers: []part.Container{{Name: "main", ID: "containerd://a", LimitBytes: limit(2 << 20)}}}}
	unlimited := part.Pod{Namespace: "ns", Pod: "q", UID: "uid-q",
		Parts: []part.Part{{Name: "data", Medium: part.MediumDisk}}}
	table := exportertest.NewTable()
	set := func(name string, used int64) {
		table.Set(uid, name, part.Measurement{UsedBytes: used, MeasuredAt: t0, CompletedAt: t0, Method: part.MethodWalk})
	}
	set("container/main/writable-layer", 1<<20)
	set("container/main/logs", 4096)
	table.Set("uid-q", "data", part.Measurement{UsedBytes: 1, MeasuredAt: t0, CompletedAt: t0, Method: part.MethodWalk})
	var mu sync.Mutex
	var crossed []noticeapi.Notice
	watch := &watchedDirs{}
	e, err := exporter.New(exporter.TestConfig(exporter.Config{NodeName: "node-1", Pods: exportertest.NewPods(limited, unlimited),
		Source: withLogDirs{exportertest.NewSource(table.Measure).Measurer()}, Now: func() time.Time { return t0 },
		MeasureEphemeralStorage: true, LogWatch: watch,
		CrossedLimit: func(n noticeapi.Notice) { mu.Lock(); defer mu.Unlock(); crossed = append(crossed, n) }}))
	if err != nil {
		t.Fatal(err)
	}
	e.Refresh(context.Background())
	e.WaitForWalks()
	want := map[string]logwatch.Pod{"/var/log/pods/ns_p_uid-p/main": {Namespace: "ns", Name: "p", UID: uid}}
	if watch.mu.Lock(); len(watch.dirs) != 1 || watch.dirs["/var/log/pods/ns_p_uid-p/main"] != want["/var/log/pods/ns_p_uid-p/main"] {
		t.Errorf("log directories watched %v, want %v: those of the pods with a limit", watch.dirs, want)
	}
	watch.mu.Unlock()
	if len(crossed) != 0 {
		t.Fatalf("noticed %+v under the limit", crossed)
	}

	set("container/main/logs", 3<<20) // a log burst: 1 MiB layer + 3 MiB logs over 2 MiB
	e.MeasureLogsNow(context.Background(), logwatch.Pod{Namespace: "ns", Name: "p", UID: uid})
	wantNotice := noticeapi.Notice{Node: "node-1", Namespace: "ns", Pod: "p", UID: uid, Check: noticeapi.CheckContainer, Container: "main"}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(crossed, []noticeapi.Notice{wantNotice}) {
		t.Errorf("after the logs were written: noticed %+v, want %+v, before any cycle", crossed, wantNotice)
	}
	if r, ok := e.LatestWalk(uid, "container/main/logs"); !ok || r.Measurement.UsedBytes != 3<<20 {
		t.Errorf("the logs' latest measurement %+v (%v), want the 3 MiB just measured", r.Measurement, ok)
	}
	// A pod of another UID under that name (recreated) is not measured for the old one.
	e.MeasureLogsNow(context.Background(), logwatch.Pod{Namespace: "ns", Name: "p", UID: "uid-old"})
	if len(crossed) != 1 {
		t.Errorf("a write told for another UID noticed %+v", crossed[1:])
	}
}
