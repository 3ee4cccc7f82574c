package exporter_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestLiveHandlerRejectsHostileInput: names that cannot be a pod, a UID or a volume get 400
// with the reason, through the same ServeMux pattern the command mounts, and no request
// reaches the source (the filesystem).
func TestLiveHandlerRejectsHostileInput(t *testing.T) {
	const base = "/live/namespaces/default/pods/empty-test1"
	uid := "?uid=" + liveUID
	tests := []struct {
		name, path string
		wantCode   int
		wantInErr  []string // nil: the answer is not the live handler's
	}{
		{"encoded dot-dot as namespace", "/live/namespaces/%2E%2E/pods/empty-test1" + uid,
			http.StatusBadRequest, []string{"namespace", "not a valid namespace name"}},
		{"encoded slashes in namespace", "/live/namespaces/..%2F..%2Fetc/pods/empty-test1" + uid,
			http.StatusBadRequest, []string{"namespace", "not a valid namespace name"}},
		{"encoded slash in pod", "/live/namespaces/default/pods/empty-test1%2F..%2F..%2Fetc" + uid,
			http.StatusBadRequest, []string{"pod", "not a valid pod name"}},
		{"upper-case pod", "/live/namespaces/default/pods/Empty-Test1" + uid,
			http.StatusBadRequest, []string{"not a valid pod name"}},
		{"pod with underscore", "/live/namespaces/default/pods/empty_test1" + uid,
			http.StatusBadRequest, []string{"not a valid pod name"}},
		{"namespace of 64 characters", "/live/namespaces/" + strings.Repeat("a", 64) + "/pods/empty-test1" + uid,
			http.StatusBadRequest, []string{"not a valid namespace name", "63"}},
		{"NUL in pod", "/live/namespaces/default/pods/empty%00test1" + uid,
			http.StatusBadRequest, []string{"not a valid pod name"}},
		{"uid as a path", base + "?uid=..%2F..%2F..%2Fetc",
			http.StatusBadRequest, []string{"uid", "not a pod UID"}},
		{"uid upper-case", base + "?uid=" + strings.ToUpper(liveUID),
			http.StatusBadRequest, []string{"not a pod UID"}},
		{"uid a config hash, not an API UID", base + "?uid=6c3a0ff2b15a4cd8e7b6f9b1f7a0c2d4",
			http.StatusBadRequest, []string{"not a pod UID"}},
		{"uid twice", base + uid + "&uid=00000000-dead-beef-0000-000000000000",
			http.StatusBadRequest, []string{"uid", "2 times"}},
		{"volume dot-dot", base + uid + "&volume=..",
			http.StatusBadRequest, []string{"volume", "not a valid volume name"}},
		{"volume as a path", base + uid + "&volume=..%2F..%2F..%2F..%2Fetc",
			http.StatusBadRequest, []string{"not a valid volume name"}},
		{"volume upper-case", base + uid + "&volume=Empty",
			http.StatusBadRequest, []string{"not a valid volume name"}},
		{"volume twice", base + uid + "&volume=empty&volume=cache",
			http.StatusBadRequest, []string{"volume", "2 times"}},
		// Dot segments never reach the handler: ServeMux redirects to the cleaned path,
		// which is not the live route.
		{"literal dot-dot segments", "/live/namespaces/default/pods/../../../../etc/passwd" + uid,
			http.StatusTemporaryRedirect, nil},
	}
	f := newLiveFixture(t, true)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodGet, f.srv.URL, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.URL.RawPath, req.URL.Path, req.URL.RawQuery = "", "", "" // sent as written below
			req.URL.Opaque = "//" + req.URL.Host + strings.SplitN(tc.path, "?", 2)[0]
			if q := strings.SplitN(tc.path, "?", 2); len(q) == 2 {
				req.URL.RawQuery = q[1]
			}
			resp, err := noRedirect.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()

			if resp.StatusCode != tc.wantCode {
				t.Fatalf("status %d %s, want %d", resp.StatusCode, body, tc.wantCode)
			}
			if tc.wantInErr == nil {
				return
			}
			checkErrorBody(t, body, tc.wantInErr)
		})
	}
	if n := f.source.Calls(); n != 0 {
		t.Errorf("the source measured %d times for hostile requests, want never", n)
	}
	// The same fixture still measures a good request: the rejections were not an accident.
	f.getOK(t, base+uid)
	if n := f.source.Calls(); n != 1 {
		t.Errorf("source calls %d after one good request, want 1", n)
	}
}
