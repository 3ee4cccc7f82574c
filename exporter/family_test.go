package exporter_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/emptydir-guard/emptydir-guard/exporter"
	"github.com/emptydir-guard/emptydir-guard/internal/metricfilter"
)

// gathered is what a scrape of c through filter shows, one line per series.
func gathered(t *testing.T, filter *metricfilter.Filter, c prometheus.Collector) []string {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	return seriesGathered(t, filter.Gatherer(reg))
}

// TestPublishesSparesWhatTheFilterDrops: an exporter told which families the scrape's filter
// exposes shows through that filter exactly what one that builds every family shows, and
// its Collect builds no series of a family the filter drops.
func TestPublishesSparesWhatTheFilterDrops(t *testing.T) {
	defaults, err := (&metricfilter.Filter{}).WithOptIn(exporter.OptInFamilies, nil)
	if err != nil {
		t.Fatal(err)
	}
	denyUsage, err := metricfilter.New(nil, []string{"emptydir_used_bytes", "emptydir_pod_ephemeral_storage_.*"})
	if err != nil {
		t.Fatal(err)
	}
	allOptIn, err := (&metricfilter.Filter{}).WithOptIn(exporter.OptInFamilies, []string{".*"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		filter *metricfilter.Filter
	}{
		{"the defaults: opt-in families hidden", defaults},
		{"a denylist", denyUsage},
		{"every opt-in family", allOptIn},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for fixture, build := range map[string]func(publishes func(string) bool) *exporter.Exporter{
				"volumes": func(publishes func(string) bool) *exporter.Exporter {
					pods, _, src, now := fixture()
					e := newTestExporterWith(t, exporter.Config{Source: src, Pods: pods, Now: func() time.Time { return *now }, Publishes: publishes})
					e.Refresh(context.Background())
					return e
				},
				"storage": func(publishes func(string) bool) *exporter.Exporter {
					return storageFixtureWith(exporter.Config{Publishes: publishes})
				},
			} {
				all, spared := build(nil), build(tc.filter.Exposes)
				if got, want := gathered(t, tc.filter, spared), gathered(t, tc.filter, all); !slices.Equal(got, want) {
					t.Errorf("%s: through the filter, the exporter told what it exposes shows\n%s\nwant\n%s", fixture, strings.Join(got, "\n"), strings.Join(want, "\n"))
				}
				built := map[string]bool{}
				for _, s := range seriesOf(t, spared) {
					name, _, _ := strings.Cut(s, "{")
					built[name] = true
				}
				for name := range built {
					if strings.HasPrefix(name, "emptydir_exporter_") {
						continue // the exporter's own counters are few, and left to the filter
					}
					if !tc.filter.Exposes(name) {
						t.Errorf("%s: Collect built series of %s, which the filter drops", fixture, name)
					}
				}
			}
		})
	}
}
