package remediator

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/emptydir-guard/emptydir-guard/exporter"
	"github.com/emptydir-guard/emptydir-guard/exporter/exportertest"
	"github.com/emptydir-guard/emptydir-guard/exporter/part"
	"github.com/emptydir-guard/emptydir-guard/internal/liveapi"
)

// contractPod is the exporter's view of node-1: pod default/web-0 (uid1) with the emptyDir
// volume "empty".
func contractPod() part.Pod {
	limit := int64(mib)
	return part.Pod{Namespace: "default", Pod: "web-0", UID: uid1,
		Parts: []part.Part{{Name: "empty", Medium: part.MediumDisk, LimitBytes: &limit}}}
}

// The remediator's ExporterMeasurer against the exporter's own live handler, in process:
// the route, the query, the answer and the error statuses are one contract, so a change on
// one side that the other does not follow fails here.
func TestExporterMeasurerAgainstExporterLiveHandler(t *testing.T) {
	started := time.Now().Add(-3 * time.Second).Truncate(time.Millisecond)
	completed := started.Add(2 * time.Second)
	measured := part.Measurement{UsedBytes: 10 * mib, InodesUsed: 3, UnreadableEntries: 2,
		MeasuredAt: started, CompletedAt: completed, Method: part.MethodWalk}
	tests := []struct {
		name       string
		pod        *podBuilder
		volume     string
		source     *exportertest.Source
		notSynced  bool
		want       Measurement
		wantReason string
	}{
		{name: "measured: numbers and the end of the walk", pod: newPod("default", "web-0", uid1), volume: "empty",
			source: exportertest.NewSource(exportertest.Answer(measured, nil)),
			want: Measurement{Source: SourceExporter, Node: "node-1", Subject: Subject{Check: CheckEmptyDir, Volume: "empty"}, UsedBytes: 10 * mib,
				UnreadableEntries: 2, Incomplete: true, IncompleteSince: started, MeasuredAt: completed}},
		{name: "walk cut short after directories changed: a lower bound, and why", pod: newPod("default", "web-0", uid1), volume: "empty",
			source: exportertest.NewSource(exportertest.Answer(part.Measurement{UsedBytes: 10 * mib, InodesUsed: 3,
				ChangedDirectories: 4, CutShort: true, MeasuredAt: started, CompletedAt: completed, Method: part.MethodWalk}, nil)),
			want: Measurement{Source: SourceExporter, Node: "node-1", Subject: Subject{Check: CheckEmptyDir, Volume: "empty"}, UsedBytes: 10 * mib,
				ChangedDirectories: 4, CutShort: true, Incomplete: true, IncompleteSince: started, MeasuredAt: completed}},
		{name: "recreated pod", pod: newPod("default", "web-0", uid2), volume: "empty",
			source: exportertest.NewSource(exportertest.Answer(measured, nil)), wantReason: MeasureNotFound},
		{name: "volume not in use", pod: newPod("default", "web-0", uid1), volume: "data",
			source: exportertest.NewSource(exportertest.Answer(measured, nil)), wantReason: MeasureNotFound},
		{name: "pod not on this node", pod: newPod("default", "web-1", uid1), volume: "empty",
			source: exportertest.NewSource(exportertest.Answer(measured, nil)), wantReason: MeasureNotFound},
		{name: "volume unreadable", pod: newPod("default", "web-0", uid1), volume: "empty",
			source: exportertest.NewSource(exportertest.Answer(part.Measurement{}, &part.MeasureError{Reason: part.ReasonPermission, Err: fs.ErrPermission})), wantReason: MeasureUnavailable},
		{name: "informer not synced", pod: newPod("default", "web-0", uid1), volume: "empty",
			source: exportertest.NewSource(exportertest.Answer(measured, nil)), notSynced: true, wantReason: MeasureUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := exporter.DefaultConfig()
			pods := exportertest.NewPods(contractPod())
			pods.SetSynced(!tt.notSynced)
			cfg.NodeName, cfg.Source, cfg.Pods = "node-1", tt.source, pods
			exp, err := exporter.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			mux := http.NewServeMux()
			mux.Handle(liveapi.Pattern, exp.LiveHandler())
			ts := httptest.NewServer(mux)
			defer ts.Close()

			got, err := NewExporterMeasurer(ts.Client(), StaticLocator(ts.URL)).Measure(t.Context(), tt.pod.build(), Subject{Check: CheckEmptyDir, Volume: tt.volume})

			if tt.wantReason != "" {
				assertMeasurement(t, got, err, 0, tt.wantReason)
				return
			}
			if err != nil {
				t.Fatalf("unexpected error %v", err)
			}
			if !got.MeasuredAt.Equal(tt.want.MeasuredAt) {
				t.Errorf("measuredAt %s, want the end of the walk %s", got.MeasuredAt, tt.want.MeasuredAt)
			}
			got.MeasuredAt = tt.want.MeasuredAt
			// A first lower bound starts its run: the exporter's evidence of how long it lasts.
			if !got.IncompleteSince.Equal(tt.want.IncompleteSince) {
				t.Errorf("incompleteSince %s, want %s", got.IncompleteSince, tt.want.IncompleteSince)
			}
			got.IncompleteSince = tt.want.IncompleteSince
			if got != tt.want {
				t.Errorf("measurement %+v, want %+v", got, tt.want)
			}
			if err := checkMeasurement(got, tt.pod.build(), time.Now(), 5*time.Second); err != nil {
				t.Errorf("a fresh answer of the pod's own exporter is rejected: %v", err)
			}
		})
	}
}
