package exporter_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/emptydir-guard/emptydir-guard/exporter"
)

// seriesOf gathers cs on a registry of their own and returns every series as
// name{label="value",...}, sorted.
func seriesOf(t *testing.T, cs ...prometheus.Collector) []string {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(cs...)
	return seriesGathered(t, reg)
}

// seriesGathered is seriesOf for what g gathers.
func seriesGathered(t *testing.T, g prometheus.Gatherer) []string {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+`"`+l.GetValue()+`"`)
			}
			sort.Strings(labels)
			out = append(out, mf.GetName()+"{"+strings.Join(labels, ",")+"}")
		}
	}
	sort.Strings(out)
	return out
}

// collectorsFixtures are exporters with volumes with and without a sizeLimit, a memory
// volume, and a pod with an ephemeral-storage limit, one of whose containers has its own.
func collectorsFixtures(t *testing.T) map[string]*exporter.Exporter {
	pods, _, src, now := fixture()
	volumes := newTestExporter(t, pods, src, now)
	volumes.Refresh(context.Background())
	storage := storageFixture(false)
	storage.Refresh(context.Background())
	return map[string]*exporter.Exporter{"volumes": volumes, "storage": storage}
}

// TestCollectorsPartitionTheExporter: the collectors a scrape selects with collect[] and
// exclude[] together publish exactly what the exporter does, each series once.
func TestCollectorsPartitionTheExporter(t *testing.T) {
	for name, e := range collectorsFixtures(t) {
		t.Run(name, func(t *testing.T) {
			all := seriesOf(t, e)
			var union []string
			owner := map[string]string{}
			for cname, c := range e.Collectors() {
				for _, s := range seriesOf(t, c) {
					if other, ok := owner[s]; ok {
						t.Errorf("%s is published by collectors %s and %s", s, other, cname)
					}
					owner[s] = cname
					union = append(union, s)
				}
			}
			sort.Strings(union)
			if !slices.Equal(union, all) {
				t.Errorf("the collectors publish\n%s\nthe exporter\n%s", strings.Join(union, "\n"), strings.Join(all, "\n"))
			}
		})
	}
}

// TestTriggerCollectorHoldsWhatTheAlertsRead: the trigger collector holds the over-limit
// series of what is over its limit, and the usage, the limit and the measurement's age of every
// emptyDir, pod and container that has a limit (the age dates the usage only in the same
// scrape), and nothing else (not the memory volume without a sizeLimit,
// the pod's parts or the container without a limit).
func TestTriggerCollectorHoldsWhatTheAlertsRead(t *testing.T) {
	fx := collectorsFixtures(t)
	cart := `medium="disk",namespace="shop",node="node-1",pod="cart-0",uid="uid-cart",volume="cache"`
	front := `medium="disk",namespace="web",node="node-1",pod="front",uid="uid-front",volume="tmp"`
	pod := `namespace="batch",node="node-1",pod="job-1",uid="uid-job"`
	for name, want := range map[string][]string{
		"volumes": {
			"emptydir_limit_bytes{" + cart + "}",
			"emptydir_limit_bytes{" + front + "}",
			"emptydir_measurement_age_seconds{" + cart + "}",
			"emptydir_measurement_age_seconds{" + front + "}",
			"emptydir_over_limit_bytes{" + cart + "}",
			"emptydir_used_bytes{" + cart + "}",
			"emptydir_used_bytes{" + front + "}",
		},
		"storage": {
			`emptydir_container_ephemeral_storage_limit_bytes{container="main",` + pod + "}",
			`emptydir_container_ephemeral_storage_over_limit_bytes{container="main",` + pod + "}",
			`emptydir_container_ephemeral_storage_used_bytes{container="main",` + pod + "}",
			"emptydir_pod_ephemeral_storage_limit_bytes{" + pod + "}",
			"emptydir_pod_ephemeral_storage_measurement_age_seconds{" + pod + "}",
			"emptydir_pod_ephemeral_storage_used_bytes{" + pod + "}",
		},
	} {
		got := seriesOf(t, fx[name].Collectors()[exporter.CollectorTrigger])
		if !slices.Equal(got, want) {
			t.Errorf("%s: the trigger collector publishes\n%s\nwant\n%s", name, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

func get(t *testing.T, h http.Handler, target, remoteAddr string) (int, string) {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, target, nil)
	if remoteAddr != "" {
		r.RemoteAddr = remoteAddr
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	body, err := io.ReadAll(w.Result().Body)
	if err != nil {
		t.Fatal(err)
	}
	return w.Code, string(body)
}

// families returns the metric family names of an exposition.
func families(t *testing.T, body string) []string {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parsing the exposition: %v\n%s", err, body)
	}
	var names []string
	for name := range mfs {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

func TestMetricsHandlerSelectsCollectors(t *testing.T) {
	e := collectorsFixtures(t)["storage"]
	h, err := e.MetricsHandler(exporter.MetricsHandlerOpts{
		Others: map[string][]prometheus.Collector{"go": {collectors.NewGoCollector()}},
		// The denylist of the command applies to every selection.
		Filter: func(g prometheus.Gatherer) prometheus.Gatherer {
			return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
				mfs, err := g.Gather()
				return slices.DeleteFunc(mfs, func(mf *dto.MetricFamily) bool { return mf.GetName() == "emptydir_exporter_pods" }), err
			})
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	trigger := []string{"emptydir_container_ephemeral_storage_limit_bytes", "emptydir_container_ephemeral_storage_over_limit_bytes", "emptydir_container_ephemeral_storage_used_bytes",
		"emptydir_pod_ephemeral_storage_limit_bytes", "emptydir_pod_ephemeral_storage_measurement_age_seconds", "emptydir_pod_ephemeral_storage_used_bytes"}

	code, body := get(t, h, "/metrics?collect[]=trigger", "")
	if got := families(t, body); code != http.StatusOK || !slices.Equal(got, trigger) {
		t.Errorf("collect[]=trigger: %d %v, want 200 %v", code, got, trigger)
	}

	code, body = get(t, h, "/metrics?exclude[]=trigger", "")
	got := families(t, body)
	if code != http.StatusOK || !slices.Contains(got, "go_goroutines") || !slices.Contains(got, "emptydir_container_ephemeral_storage_part_bytes") {
		t.Errorf("exclude[]=trigger: %d %v, want 200 with the Go runtime's and the parts' families", code, got)
	}
	// The side container has no limit of its own: its usage is no trigger series.
	if strings.Contains(body, `emptydir_container_ephemeral_storage_used_bytes{container="main"`) ||
		!strings.Contains(body, `emptydir_container_ephemeral_storage_used_bytes{container="side"`) {
		t.Errorf("exclude[]=trigger holds the limited container's usage or lacks the unlimited one's:\n%s", body)
	}

	_, all := get(t, h, "/metrics", "")
	_, both := get(t, h, "/metrics?collect[]=trigger&collect[]=volumes&collect[]=ephemeral_storage&collect[]=exporter&collect[]=go", "")
	if slices.Contains(families(t, all), "emptydir_exporter_pods") {
		t.Error("the filter is not applied to a plain scrape")
	}
	if !slices.Equal(families(t, all), families(t, both)) {
		t.Errorf("a plain scrape gives %v, every collector selected %v", families(t, all), families(t, both))
	}

	for target, want := range map[string]string{
		"/metrics?collect[]=trigger&exclude[]=go": "cannot be combined",
		"/metrics?collect[]=volume":               `unknown collector "volume": the collectors are ephemeral_storage, exporter, go, trigger, volumes`,
		"/metrics?exclude[]=":                     `unknown collector ""`,
	} {
		if code, body := get(t, h, target, ""); code != http.StatusBadRequest || !strings.Contains(body, want) {
			t.Errorf("%s: %d %q, want 400 with %q", target, code, body, want)
		}
	}
}

// TestOnlyTriggerScrapesAlign: the collection cycle aligns to the scrapes that fetch the
// trigger series, not to a slower scrape of the rest from the same Prometheus.
func TestOnlyTriggerScrapesAlign(t *testing.T) {
	const aligned = `# HELP emptydir_exporter_collection_aligned 1 when the collection cycle ends just before a regular scraper's scrapes, else 0.
# TYPE emptydir_exporter_collection_aligned gauge
emptydir_exporter_collection_aligned{node="node-1"} `
	for _, tc := range []struct {
		query string
		want  string
	}{
		{"?exclude[]=trigger", "0"},
		{"?collect[]=exporter", "0"},
		{"?collect[]=trigger", "1"},
		{"", "1"},
	} {
		pods, _, src, now := fixture()
		e, err := exporter.New(exporter.TestConfig(exporter.Config{NodeName: "node-1", Source: src, Pods: pods, Now: func() time.Time { return *now }, AlignToScrapes: true}))
		if err != nil {
			t.Fatal(err)
		}
		h, err := e.MetricsHandler(exporter.MetricsHandlerOpts{})
		if err != nil {
			t.Fatal(err)
		}
		start := *now
		for i := range exporter.ScrapeHistory {
			*now = start.Add(time.Duration(i)*5*time.Second + 2*time.Second)
			if code, body := get(t, h, "/metrics"+tc.query, "10.0.0.1:4000"); code != http.StatusOK {
				t.Fatalf("%s: %d %s", tc.query, code, body)
			}
		}
		e.NextCycle(*now, 5*time.Second)
		if err := testutil.CollectAndCompare(e, strings.NewReader(aligned+tc.want+"\n"), "emptydir_exporter_collection_aligned"); err != nil {
			t.Errorf("scrapes /metrics%s: %v", tc.query, err)
		}
	}
}
