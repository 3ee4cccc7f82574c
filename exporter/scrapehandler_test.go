package exporter_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/emptydir-guard/emptydir-guard/exporter"
)

// TestScrapeHandler: requests to the wrapped handler teach the aligner; the metrics say
// what the cycle does.
func TestScrapeHandler(t *testing.T) {
	pods, _, src, now := fixture()
	e, err := exporter.New(exporter.TestConfig(exporter.Config{NodeName: "node-1", Source: src, Pods: pods, Now: func() time.Time { return *now }, AlignToScrapes: true}))
	if err != nil {
		t.Fatal(err)
	}
	served := 0
	h := e.ScrapeHandler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served++ }))
	start := *now
	for i := range exporter.ScrapeHistory {
		*now = start.Add(time.Duration(i)*5*time.Second + 2*time.Second)
		r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		r.RemoteAddr = "10.0.0.1:" + string(rune('1'+i)) + "000"
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	if served != exporter.ScrapeHistory {
		t.Fatalf("the wrapped handler served %d of %d requests", served, exporter.ScrapeHistory)
	}
	e.NextCycle(*now, 5*time.Second)
	want := `# HELP emptydir_exporter_aligned_scrape_interval_seconds The interval in seconds of the scraper the collection cycle follows; absent when not aligned.
# TYPE emptydir_exporter_aligned_scrape_interval_seconds gauge
emptydir_exporter_aligned_scrape_interval_seconds{node="node-1"} 5
# HELP emptydir_exporter_collection_aligned 1 when the collection cycle ends just before a regular scraper's scrapes, else 0.
# TYPE emptydir_exporter_collection_aligned gauge
emptydir_exporter_collection_aligned{node="node-1"} 1
`
	if err := testutil.CollectAndCompare(e, strings.NewReader(want),
		"emptydir_exporter_collection_aligned", "emptydir_exporter_aligned_scrape_interval_seconds"); err != nil {
		t.Error(err)
	}

	off := newTestExporter(t, pods, src, now)
	if off.Aligned() {
		t.Fatal("an exporter without AlignToScrapes has an aligner")
	}
	if got := off.NextCycle(*now, 5*time.Second); !got.Equal(now.Add(5 * time.Second)) {
		t.Errorf("without alignment the next cycle starts at +%v, want the fixed +5s", got.Sub(*now))
	}
	if got := off.NextCycle(now.Add(-6*time.Second), 5*time.Second); !got.Equal(*now) {
		t.Errorf("without alignment, after a cycle that overran, the next starts at %+v from now, want now", got.Sub(*now))
	}
}
