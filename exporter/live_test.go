package exporter_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/emptydir-guard/emptydir-guard/exporter"
	"github.com/emptydir-guard/emptydir-guard/exporter/exportertest"
	"github.com/emptydir-guard/emptydir-guard/exporter/part"
	"github.com/emptydir-guard/emptydir-guard/exporter/source"
	"github.com/emptydir-guard/emptydir-guard/internal/fswalk"
	"github.com/emptydir-guard/emptydir-guard/internal/liveapi"
)

const (
	liveUID        = "5cf142d1-7a2d-4698-a7e0-f6ebfc0d4b7d" // default/empty-test1
	liveNoDirUID   = "7e0a9f31-1b2c-4d5e-8f90-a1b2c3d4e5f6" // default/no-directory
	liveLimitBytes = 1 << 20
)

// livePods: empty-test1 has a disk volume with a sizeLimit and a memory volume
// without one, both with directories; no-directory's volume directory does not exist.
func livePods() []part.Pod {
	return []part.Pod{
		exportertest.PodWith("default", "empty-test1", liveUID,
			exportertest.VolLimit("empty", part.MediumDisk, liveLimitBytes), exportertest.Vol("cache", part.MediumMemory)),
		exportertest.PodWith("default", "no-directory", liveNoDirUID, exportertest.Vol("data", part.MediumDisk)),
	}
}

type liveFixture struct {
	root string
	// source counts the requests that reach the real source (Calls).
	source *exportertest.Source
	exp    *exporter.Exporter
	srv    *httptest.Server
}

// newLiveFixture builds a kubelet root dir with real files, an exporter over it
// with a source.Filesystem, and serves its live endpoint.
func newLiveFixture(t *testing.T, synced bool) *liveFixture {
	t.Helper()
	root := t.TempDir()
	f := &liveFixture{root: root}

	empty := f.dir(liveUID, "empty")
	writeBytes(t, filepath.Join(empty, "a.bin"), 64<<10)
	writeBytes(t, filepath.Join(empty, "nested", "deeper", "b.bin"), 10_000)
	if err := os.Link(filepath.Join(empty, "a.bin"), filepath.Join(empty, "nested", "a-link.bin")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(empty, "passwd-link")); err != nil {
		t.Fatal(err)
	}
	writeBytes(t, filepath.Join(f.dir(liveUID, "cache"), "c.bin"), 3000)

	f.source = exportertest.NewSource(exportertest.Through(&source.Filesystem{KubeletRootDir: root, WalkConcurrency: 2}))
	pods := exportertest.NewPods(livePods()...)
	pods.SetSynced(synced)
	exp, err := exporter.New(exporter.TestConfig(exporter.Config{
		NodeName: "node-1",
		Source:   f.source,
		Pods:     pods,
	}))
	if err != nil {
		t.Fatal(err)
	}
	f.exp = exp
	mux := http.NewServeMux()
	mux.Handle(liveapi.Pattern, exp.LiveHandler())
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *liveFixture) dir(uid, name string) string { return part.EmptyDirPath(f.root, uid, name) }

// get requests path and returns the status and body; it checks the headers every
// answer must carry.
func (f *liveFixture) get(t *testing.T, path string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(f.srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("GET %s: Content-Type %q, want application/json", path, ct)
	}
	if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("GET %s: Cache-Control %q, want no-store", path, cc)
	}
	return resp.StatusCode, body
}

func (f *liveFixture) getOK(t *testing.T, path string) liveapi.Response {
	t.Helper()
	code, body := f.get(t, path)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s, want 200", path, code, body)
	}
	var r liveapi.Response
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("GET %s: decoding %s: %v", path, body, err)
	}
	return r
}

func writeBytes(t *testing.T, path string, n int) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil { // not zeros: nothing may make it sparse
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil { // allocate the blocks now
		t.Fatal(err)
	}
}

func TestLiveHandlerRejects(t *testing.T) {
	tests := []struct {
		name, path string
		synced     bool
		wantCode   int
		wantInErr  []string
	}{
		{"uid missing", "/live/namespaces/default/pods/empty-test1", true,
			http.StatusBadRequest, []string{"uid"}},
		{"uid empty", "/live/namespaces/default/pods/empty-test1?uid=", true,
			http.StatusBadRequest, []string{"uid"}},
		{"unknown pod, or a pod on another node", "/live/namespaces/default/pods/gone?uid=" + liveUID, true,
			http.StatusNotFound, []string{"default/gone", "not on node node-1", "exporter of the pod's node"}},
		{"pod in another namespace", "/live/namespaces/other/pods/empty-test1?uid=" + liveUID, true,
			http.StatusNotFound, []string{"other/empty-test1"}},
		{"UID of an earlier instance", "/live/namespaces/default/pods/empty-test1?uid=00000000-dead-beef-0000-000000000000", true,
			http.StatusNotFound, []string{"recreated", liveUID, "00000000-dead-beef-0000-000000000000"}},
		{"unknown volume", "/live/namespaces/default/pods/empty-test1?uid=" + liveUID + "&volume=nope", true,
			http.StatusNotFound, []string{`"nope"`}},
		{"volume directory missing", "/live/namespaces/default/pods/no-directory?uid=" + liveNoDirUID, true,
			http.StatusServiceUnavailable, []string{`"data"`, "not_found"}},
		{"informer not synced", "/live/namespaces/default/pods/empty-test1?uid=" + liveUID, false,
			http.StatusServiceUnavailable, []string{"synced"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newLiveFixture(t, tc.synced)

			code, body := f.get(t, tc.path)

			if code != tc.wantCode {
				t.Fatalf("status %d %s, want %d", code, body, tc.wantCode)
			}
			checkErrorBody(t, body, tc.wantInErr)
		})
	}
}

// checkErrorBody checks that body is the documented error answer, {"error": "..."} (decoded
// here by its wire name, not through the shared type, so that a renamed field fails), and
// that its message mentions each of wantInErr.
func checkErrorBody(t *testing.T, body []byte, wantInErr []string) {
	t.Helper()
	var e struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Error == "" {
		t.Fatalf("body %s is not {\"error\": \"...\"} (%v)", body, err)
	}
	for _, s := range wantInErr {
		if !strings.Contains(e.Error, s) {
			t.Errorf("error %q does not mention %q", e.Error, s)
		}
	}
}

// volumeKeys are the fields docs/metrics.md gives a live volume.
var volumeKeys = []string{"capacityBytes", "completedAt", "inodesUsed", "limitBytes", "lowerBound", "measuredAt", "medium", "name", "unreadableEntries", "usedBytes"}

func TestLiveHandlerMeasuresVolumes(t *testing.T) {
	f := newLiveFixture(t, true)
	before := time.Now()

	code, body := f.get(t, "/live/namespaces/default/pods/empty-test1?uid="+liveUID)

	after := time.Now()
	if code != http.StatusOK {
		t.Fatalf("status %d %s, want 200", code, body)
	}
	// The exact field names of the contract, limitBytes only where there is a sizeLimit.
	var top map[string]json.RawMessage
	var vols []map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(top["volumes"], &vols); err != nil {
		t.Fatal(err)
	}
	if got, want := slices.Sorted(maps.Keys(top)), []string{"measuredAt", "namespace", "node", "pod", "source", "uid", "volumes"}; !slices.Equal(got, want) {
		t.Errorf("response fields %v, want %v", got, want)
	}
	if len(vols) != 2 {
		t.Fatalf("got %d volumes, want 2: %s", len(vols), body)
	}
	if got := slices.Sorted(maps.Keys(vols[0])); !slices.Equal(got, volumeKeys) {
		t.Errorf("volume with sizeLimit has fields %v, want %v", got, volumeKeys)
	}
	noLimit := slices.DeleteFunc(slices.Clone(volumeKeys), func(k string) bool { return k == "limitBytes" })
	if got := slices.Sorted(maps.Keys(vols[1])); !slices.Equal(got, noLimit) {
		t.Errorf("volume without sizeLimit has fields %v, want %v (limitBytes left out)", got, noLimit)
	}

	var r liveapi.Response
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatal(err)
	}
	if r.Node != "node-1" || r.Namespace != "default" || r.Pod != "empty-test1" || r.UID != liveUID || r.Source != "filesystem" {
		t.Errorf("response identifies %s %s/%s %s from %s, want node-1 default/empty-test1 %s from filesystem",
			r.Node, r.Namespace, r.Pod, r.UID, r.Source, liveUID)
	}
	inWindow(t, "measuredAt", r.MeasuredAt, before, after)

	for i, want := range []struct {
		name, medium string
		limit        *int64
	}{
		{"empty", part.MediumDisk, exportertest.VolLimit("", "", liveLimitBytes).LimitBytes},
		{"cache", part.MediumMemory, nil},
	} {
		v := r.Volumes[i]
		dir := f.dir(liveUID, want.name)
		du, err := fswalk.MeasureDiskUsage(context.Background(), dir, fswalk.Options{Concurrency: 1})
		if err != nil {
			t.Fatal(err)
		}
		space, err := fswalk.FilesystemSpace(dir)
		if err != nil {
			t.Fatal(err)
		}
		if v.Name != want.name || v.Medium != want.medium {
			t.Errorf("volume %d is %s (%s), want %s (%s)", i, v.Name, v.Medium, want.name, want.medium)
		}
		if (v.LimitBytes == nil) != (want.limit == nil) || (v.LimitBytes != nil && *v.LimitBytes != *want.limit) {
			t.Errorf("%s: limitBytes %v, want %v", v.Name, liveInt(v.LimitBytes), liveInt(want.limit))
		}
		if *v.UsedBytes != du.UsedBytes {
			t.Errorf("%s: usedBytes %d, MeasureDiskUsage says %d", v.Name, *v.UsedBytes, du.UsedBytes)
		}
		if gnu := exportertest.DuBytes(t, dir); *v.UsedBytes != gnu {
			t.Errorf("%s: usedBytes %d, du -s -B1 says %d", v.Name, *v.UsedBytes, gnu)
		}
		if *v.UsedBytes <= 0 {
			t.Errorf("%s: usedBytes %d for a directory with files", v.Name, *v.UsedBytes)
		}
		if v.InodesUsed != du.Inodes {
			t.Errorf("%s: inodesUsed %d, want %d", v.Name, v.InodesUsed, du.Inodes)
		}
		if want := space.CapacityBytes; v.CapacityBytes != want {
			t.Errorf("%s: capacityBytes %d, statfs says %d", v.Name, v.CapacityBytes, want)
		}
		if v.UnreadableEntries != 0 {
			t.Errorf("%s: unreadableEntries %d, want 0", v.Name, v.UnreadableEntries)
		}
		if v.LowerBound || v.ChangedDirectories != 0 || v.CutShort {
			t.Errorf("%s: lowerBound %t, changedDirectories %d, cutShort %t for a volume nobody changes: want a complete walk",
				v.Name, v.LowerBound, v.ChangedDirectories, v.CutShort)
		}
		inWindow(t, v.Name+" measuredAt", v.MeasuredAt, before, after)
		inWindow(t, v.Name+" completedAt", v.CompletedAt, v.MeasuredAt, after)
	}
	// empty: root directory, a.bin (hard-linked once), nested, deeper, b.bin, the symlink.
	if got := r.Volumes[0].InodesUsed; got != 6 {
		t.Errorf("empty: inodesUsed %d, want 6", got)
	}
}

func TestLiveHandlerOneVolume(t *testing.T) {
	f := newLiveFixture(t, true)

	r := f.getOK(t, "/live/namespaces/default/pods/empty-test1?uid="+liveUID+"&volume=cache")

	if len(r.Volumes) != 1 || r.Volumes[0].Name != "cache" {
		t.Fatalf("volumes %+v, want only cache", r.Volumes)
	}
	if gnu := exportertest.DuBytes(t, f.dir(liveUID, "cache")); *r.Volumes[0].UsedBytes != gnu {
		t.Errorf("cache: usedBytes %d, du says %d", *r.Volumes[0].UsedBytes, gnu)
	}
}

func TestLiveHandlerMeasuresAtRequestTime(t *testing.T) {
	f := newLiveFixture(t, true)
	// A collection snapshot exists: the live endpoint must not answer from it.
	f.exp.Refresh(context.Background())
	path := "/live/namespaces/default/pods/empty-test1?uid=" + liveUID + "&volume=empty"

	first := f.getOK(t, path)
	writeBytes(t, filepath.Join(f.dir(liveUID, "empty"), "grown.bin"), 1<<20)
	second := f.getOK(t, path)

	grew := *second.Volumes[0].UsedBytes - *first.Volumes[0].UsedBytes
	if grew < 1<<20 {
		t.Errorf("usedBytes grew by %d after writing 1 MiB (%d -> %d): the live answer is not measured at request time",
			grew, *first.Volumes[0].UsedBytes, *second.Volumes[0].UsedBytes)
	}
	if !second.Volumes[0].MeasuredAt.After(first.Volumes[0].MeasuredAt) {
		t.Errorf("second measuredAt %s is not after the first %s", second.Volumes[0].MeasuredAt, first.Volumes[0].MeasuredAt)
	}
	if gnu := exportertest.DuBytes(t, f.dir(liveUID, "empty")); *second.Volumes[0].UsedBytes != gnu {
		t.Errorf("usedBytes %d after growth, du says %d", *second.Volumes[0].UsedBytes, gnu)
	}
	if *second.Volumes[0].UsedBytes <= liveLimitBytes {
		t.Errorf("usedBytes %d should now exceed the 1 MiB sizeLimit", *second.Volumes[0].UsedBytes)
	}
}

func TestLiveHandlerCountsRequestsByCode(t *testing.T) {
	f := newLiveFixture(t, true)
	base := "/live/namespaces/default/pods/"
	for _, p := range []string{
		base + "empty-test1?uid=" + liveUID,
		base + "empty-test1?uid=" + liveUID + "&volume=empty",
		base + "empty-test1",
		base + "gone?uid=" + liveUID,
		base + "empty-test1?uid=00000000-dead-beef-0000-000000000000",
		base + "empty-test1?uid=" + liveUID + "&volume=nope",
		base + "no-directory?uid=" + liveNoDirUID,
	} {
		f.get(t, p)
	}

	want := `
# HELP emptydir_exporter_live_requests_total Live measurement requests, by HTTP status code.
# TYPE emptydir_exporter_live_requests_total counter
emptydir_exporter_live_requests_total{code="200",node="node-1"} 2
emptydir_exporter_live_requests_total{code="400",node="node-1"} 1
emptydir_exporter_live_requests_total{code="404",node="node-1"} 3
emptydir_exporter_live_requests_total{code="429",node="node-1"} 0
emptydir_exporter_live_requests_total{code="503",node="node-1"} 1
# HELP emptydir_exporter_measurement_errors_total Volumes that could not be measured, by source and reason.
# TYPE emptydir_exporter_measurement_errors_total counter
emptydir_exporter_measurement_errors_total{node="node-1",reason="io",source="filesystem"} 0
emptydir_exporter_measurement_errors_total{node="node-1",reason="not_found",source="filesystem"} 1
emptydir_exporter_measurement_errors_total{node="node-1",reason="permission",source="filesystem"} 0
emptydir_exporter_measurement_errors_total{node="node-1",reason="timeout",source="filesystem"} 0
`
	if err := testutil.CollectAndCompare(f.exp, strings.NewReader(want),
		"emptydir_exporter_live_requests_total", "emptydir_exporter_measurement_errors_total"); err != nil {
		t.Error(err)
	}
}

func inWindow(t *testing.T, what string, got, from, to time.Time) {
	t.Helper()
	if got.Before(from) || got.After(to) {
		t.Errorf("%s %s is not within the request (%s .. %s)", what, got, from, to)
	}
}

func liveInt(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}
