package exporter_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/emptydir-guard/emptydir-guard/exporter"
	"github.com/emptydir-guard/emptydir-guard/exporter/exportertest"
	"github.com/emptydir-guard/emptydir-guard/exporter/part"
	"github.com/emptydir-guard/emptydir-guard/exporter/source"
	"github.com/emptydir-guard/emptydir-guard/internal/liveapi"
)

// FuzzLiveRequest sends hostile request targets (path traversal, encoded slashes, NUL,
// very long names, odd queries) through net/http's request parser and a ServeMux to the
// live handler, the way the exporter's server does. Whatever the target, the handler
// measures only volumes of a pod in its cache, answers 200 only for the exact pod instance
// the request names, and answers everything else with a JSON error.
func FuzzLiveRequest(f *testing.F) {
	const base = "/live/namespaces/default/pods/empty-test1"
	measures := base + "?uid=" + liveUID
	for _, seed := range []string{
		measures,
		base + "?uid=" + liveUID + "&volume=empty",
		base + "?uid=" + liveUID + "&volume=../../../../etc",
		base + "?uid=../" + liveUID + "&volume=empty",
		base + "?uid=" + liveUID + "&uid=other",
		base + "?uid=%00&volume=%00",
		"/live/namespaces/default/pods/no-directory?uid=" + liveNoDirUID,
		"/live/namespaces/../pods/empty-test1?uid=" + liveUID,
		"/live/namespaces/default/pods/..%2F..%2F..%2Fetc?uid=" + liveUID,
		"/live/namespaces/default%2Fpods%2Fempty-test1/pods/x?uid=" + liveUID,
		"/live/namespaces/default/pods/empty-test1%00?uid=" + liveUID,
		"/live/namespaces/default/pods/" + strings.Repeat("a", 8192) + "?uid=" + liveUID,
		"/live/namespaces//pods/?uid=x",
		"//live/namespaces/default/pods/empty-test1?uid=" + liveUID,
		"http://other/live/namespaces/default/pods/empty-test1?uid=" + liveUID,
		"*",
	} {
		f.Add(seed)
	}

	root := f.TempDir()
	for _, v := range []string{"empty", "cache"} {
		dir := part.EmptyDirPath(root, liveUID, v)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			f.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "data"), []byte(strings.Repeat("x", 4096)), 0o644); err != nil {
			f.Fatal(err)
		}
	}
	// src records which pod volumes it was asked to measure (Take): nothing outside the pod
	// cache may ever be walked.
	src := exportertest.NewSource(exportertest.Through(&source.Filesystem{KubeletRootDir: root, WalkConcurrency: 1}))
	cached := livePods()
	exp, err := exporter.New(exporter.TestConfig(exporter.Config{NodeName: "node-1", Source: src, Pods: exportertest.NewPods(cached...)}))
	if err != nil {
		f.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(liveapi.Pattern, exp.LiveHandler())

	f.Fuzz(func(t *testing.T, target string) {
		raw := "GET " + target + " HTTP/1.1\r\nHost: exporter\r\n\r\n"
		req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
		if err != nil {
			return // the server answers 400 before any handler runs
		}
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		measured := src.Take()
		if target == measures && (rec.Code != http.StatusOK || len(measured) != 1) {
			// The fixture must be able to measure, or the properties below hold vacuously.
			t.Fatalf("GET %q: %d after %d measurements, want 200 after 1: %s", target, rec.Code, len(measured), rec.Body)
		}

		if len(measured) > 1 {
			t.Fatalf("GET %q: %d pods measured for one request", target, len(measured))
		}
		var pod part.Pod
		if len(measured) == 1 {
			pod = measured[0]
			i := slices.IndexFunc(cached, func(c part.Pod) bool {
				return c.Namespace == pod.Namespace && c.Pod == pod.Pod && c.UID == pod.UID
			})
			if i < 0 {
				t.Fatalf("GET %q: measured %s/%s uid %q, which is not in the pod cache", target, pod.Namespace, pod.Pod, pod.UID)
			}
			for _, v := range pod.Parts {
				if !slices.Contains(cached[i].Parts, v) {
					t.Fatalf("GET %q: measured volume %+v, which pod %s/%s does not have", target, v, pod.Namespace, pod.Pod)
				}
			}
		}

		if rec.Header().Get("Content-Type") != "application/json" {
			// Answered by the mux itself (no route, redirect to the clean path): nothing measured.
			if len(measured) > 0 || rec.Code == http.StatusOK {
				t.Fatalf("GET %q: %d from outside the live handler, %d pods measured", target, rec.Code, len(measured))
			}
			return
		}
		if rec.Code != http.StatusOK {
			var e struct {
				Error string `json:"error"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error == "" {
				t.Fatalf("GET %q: %d without a JSON error (%v): %s", target, rec.Code, err, rec.Body)
			}
			if rec.Code >= 500 && len(measured) == 0 {
				t.Fatalf("GET %q: %d without a measurement failing: %s", target, rec.Code, rec.Body)
			}
			return
		}
		if len(measured) != 1 {
			t.Fatalf("GET %q: 200 without a measurement: %s", target, rec.Body)
		}
		var resp liveapi.Response
		if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
			t.Fatalf("GET %q: decoding %s: %v", target, rec.Body, err)
		}
		if resp.Namespace != pod.Namespace || resp.Pod != pod.Pod || resp.UID != pod.UID {
			t.Fatalf("GET %q: answered for %s/%s uid %q, measured %s/%s uid %q", target,
				resp.Namespace, resp.Pod, resp.UID, pod.Namespace, pod.Pod, pod.UID)
		}
		for _, v := range resp.Volumes {
			if !slices.ContainsFunc(pod.Parts, func(m part.Part) bool { return m.Name == v.Name }) {
				t.Fatalf("GET %q: answer has volume %q, which was not measured", target, v.Name)
			}
		}
	})
}
