package exporter_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/emptydir-guard/emptydir-guard/exporter"
	"github.com/emptydir-guard/emptydir-guard/exporter/exportertest"
	"github.com/emptydir-guard/emptydir-guard/exporter/part"
	"github.com/emptydir-guard/emptydir-guard/exporter/source"
	"github.com/emptydir-guard/emptydir-guard/internal/fswalk"
	"github.com/emptydir-guard/emptydir-guard/internal/liveapi"
)

// TestProjectQuotaChargePublishedAsExcess: the volume of a hostUsers: false pod, 1 MiB under
// its 2 MiB sizeLimit, whose project quota another tenant has charged with 4 MiB (issue 30,
// item 9; the kernel lane's TestProjectQuotaChargedByAHostUsersTenant charges a real one):
// the exporter publishes the walk, no over-limit series, and the 4 MiB as the quota's excess,
// and its live answer, what the remediator evicts on, is the walk.
func TestProjectQuotaChargePublishedAsExcess(t *testing.T) {
	root := t.TempDir()
	limit := int64(2 << 20)
	pod := part.Pod{Namespace: "ns", Pod: "victim", UID: "0e1f6b7a-0000-4000-8000-00000000000a", UserNamespace: true,
		Parts: []part.Part{{Name: "cache", Medium: part.MediumDisk, LimitBytes: &limit}}}
	dir := part.EmptyDirPath(root, pod.UID, "cache")
	writeBytes(t, filepath.Join(dir, "data"), 1<<20)
	walked, err := fswalk.MeasureDiskUsage(context.Background(), dir, fswalk.Options{Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	const charged = 4 << 20
	src := source.DefaultFilesystem()
	src.KubeletRootDir = root
	src.ReadQuota = func(string) (fswalk.DiskUsage, error) {
		return fswalk.DiskUsage{UsedBytes: walked.UsedBytes + charged, Inodes: walked.Inodes + 5}, nil
	}
	e := newTestExporterWith(t, exporter.Config{Source: &src, Pods: exportertest.NewPods(pod)})
	e.Refresh(context.Background())

	families := gatherFamilies(t, e)
	if used := families["emptydir_used_bytes"]["victim"]; used != float64(walked.UsedBytes) {
		t.Errorf("emptydir_used_bytes %v, want the walk's %d", used, walked.UsedBytes)
	}
	if over := families["emptydir_over_limit_bytes"]; len(over) > 0 {
		t.Errorf("emptydir_over_limit_bytes published for %v: EmptyDirOverLimit would fire", over)
	}
	if excess := families["emptydir_project_quota_excess_bytes"]["victim"]; excess != charged {
		t.Errorf("emptydir_project_quota_excess_bytes %v, want %d", excess, charged)
	}

	mux := http.NewServeMux()
	mux.Handle(liveapi.Pattern, e.LiveHandler())
	srv := httptest.NewServer(mux)
	defer srv.Close()
	answer := liveGet(t, srv.URL+"/live/namespaces/ns/pods/victim?uid="+pod.UID)
	if got := liveUsed(answer); got != walked.UsedBytes {
		t.Errorf("live answer: %d bytes, want the walk's %d", got, walked.UsedBytes)
	}
}

// gatherFamilies is every gauge of e by family and pod.
func gatherFamilies(t *testing.T, e *exporter.Exporter) map[string]map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(e)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if m.GetGauge() == nil {
				continue
			}
			if out[mf.GetName()] == nil {
				out[mf.GetName()] = map[string]float64{}
			}
			for _, l := range m.GetLabel() {
				if l.GetName() == "pod" {
					out[mf.GetName()][l.GetValue()] = m.GetGauge().GetValue()
				}
			}
		}
	}
	return out
}

// liveGet is the exporter's live answer at url, which must be 200.
func liveGet(t *testing.T, url string) liveapi.Response {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var answer liveapi.Response
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d, %v", url, resp.StatusCode, err)
	}
	return answer
}

// liveUsed is the used bytes of the one volume of a live answer; -1 when it has none.
func liveUsed(answer liveapi.Response) int64 {
	if len(answer.Volumes) != 1 || answer.Volumes[0].UsedBytes == nil {
		return -1
	}
	return *answer.Volumes[0].UsedBytes
}
