package liveapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/emptydir-guard/emptydir-guard/internal/liveapi"
)

func TestURL(t *testing.T) {
	tests := []struct {
		name, base, volume, want string
		wantErr                  bool
	}{
		{name: "one volume", base: "http://10.0.0.1:9809", volume: "empty",
			want: "http://10.0.0.1:9809/live/namespaces/default/pods/web-0?uid=5cf142d1-7a2d-4698-a7e0-f6ebfc0d4b7d&volume=empty"},
		{name: "trailing slash, all volumes", base: "https://[fd00::4]:9809/",
			want: "https://[fd00::4]:9809/live/namespaces/default/pods/web-0?uid=5cf142d1-7a2d-4698-a7e0-f6ebfc0d4b7d"},
		{name: "not a URL", base: "http://[::1", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := liveapi.URL(tt.base, "default", "web-0", "5cf142d1-7a2d-4698-a7e0-f6ebfc0d4b7d", tt.volume)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("URL(%q) = %s, want an error", tt.base, u)
				}
				return
			}
			if err != nil || u.String() != tt.want {
				t.Fatalf("URL(%q) = %v, %v; want %s", tt.base, u, err, tt.want)
			}
		})
	}
}

// The URL the client builds is the route the server serves, wildcards and query included.
func TestURLMatchesPattern(t *testing.T) {
	var got [4]string
	mux := http.NewServeMux()
	mux.HandleFunc(liveapi.Pattern, func(_ http.ResponseWriter, r *http.Request) {
		got = [4]string{r.PathValue(liveapi.PathNamespace), r.PathValue(liveapi.PathPod),
			r.URL.Query().Get(liveapi.QueryUID), r.URL.Query().Get(liveapi.QueryVolume)}
	})
	u, err := liveapi.URL("http://exporter:9809", "team-a", "web-0.x", "u-1", "scratch")
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodGet, u.String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, pattern := mux.Handler(req); pattern != liveapi.Pattern {
		t.Fatalf("%s matches %q, want %q", u, pattern, liveapi.Pattern)
	}
	mux.ServeHTTP(nopWriter{}, req)
	if want := [4]string{"team-a", "web-0.x", "u-1", "scratch"}; got != want {
		t.Errorf("server read %q, want %q", got, want)
	}
}

type nopWriter struct{}

func (nopWriter) Header() http.Header         { return http.Header{} }
func (nopWriter) Write(b []byte) (int, error) { return len(b), nil }
func (nopWriter) WriteHeader(int)             {}

// incompleteSince is an optional field: left out of a complete answer, so that the answer's
// shape is what clients before it read; RFC 3339 when set.
func TestIncompleteSinceIsOptional(t *testing.T) {
	used := int64(1)
	complete, err := json.Marshal(liveapi.Response{Volumes: []liveapi.Volume{{Name: "v", UsedBytes: &used}},
		EphemeralStorage: &liveapi.PodStorage{Containers: []liveapi.ContainerStorage{{Name: "c"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(complete), "incompleteSince") {
		t.Errorf("a complete answer carries incompleteSince: %s", complete)
	}
	since := time.Date(2026, 12, 2, 17, 0, 0, 0, time.UTC)
	lower, err := json.Marshal(liveapi.Volume{Name: "v", UsedBytes: &used, LowerBound: true, IncompleteSince: since})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(lower), `"incompleteSince":"2026-12-02T17:00:00Z"`) {
		t.Errorf("a lower bound's incompleteSince is not RFC 3339: %s", lower)
	}
}
