package helmchart_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/emptydir-guard/emptydir-guard/deploy/deploytest"
)

// overLimitEvaluation is the evaluation interval of the rule group of EmptyDirOverLimit in
// rules/emptydir-guard.rules.yml; 0 when the group has none of its own.
func overLimitEvaluation(t *testing.T) time.Duration {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, "rules/emptydir-guard.rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Interval string
			Rules    []struct{ Alert string }
		}
	}
	if err := yaml.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			if r.Alert != "EmptyDirOverLimit" {
				continue
			}
			if g.Interval == "" {
				return 0
			}
			d, err := time.ParseDuration(g.Interval)
			if err != nil {
				t.Fatal(err)
			}
			return d
		}
	}
	t.Fatal("no rule group holds EmptyDirOverLimit")
	return 0
}

// TestMonitorIntervals: by default the exporter is scraped at a whole multiple of its
// collection interval (so the cycle aligns just before the scrapes, see docs/metrics.md) and
// no slower than 5s (every eviction waits for that scrape, see docs/performance.md), while
// EmptyDirOverLimit is evaluated at most every half of that, and the remediator keeps the
// slower interval; with the PodMonitors and the ServiceMonitors. With the kubelet source
// (collected every 30s) the exporter is scraped at its collection interval, not faster.
func TestMonitorIntervals(t *testing.T) {
	for _, monitor := range []struct{ name, values, kind, endpoints string }{
		{"PodMonitor", "podMonitor: {enabled: true}", "PodMonitor", "podMetricsEndpoints"},
		{"ServiceMonitor", "serviceMonitor: {enabled: true}", "ServiceMonitor", "endpoints"},
		{"PodMonitor/kubelet-source", "{podMonitor: {enabled: true}, exporter: {source: kubelet}}", "PodMonitor", "podMetricsEndpoints"},
		{"ServiceMonitor/kubelet-source", "{serviceMonitor: {enabled: true}, exporter: {source: kubelet}}", "ServiceMonitor", "endpoints"},
	} {
		t.Run(monitor.name, func(t *testing.T) {
			r := release("guard")
			if err := yaml.Unmarshal([]byte(monitor.values), &r.Values); err != nil {
				t.Fatal(err)
			}
			rendered := render(t, r)
			collection, err := time.ParseDuration(deploytest.ArgValues(deploytest.ExporterDaemonSet(t, rendered.objs, "guard-emptydir-exporter").Spec.Template.Spec.Containers[0].Args, "collection.interval")[0])
			if err != nil {
				t.Fatal(err)
			}
			interval := func(name string) time.Duration {
				t.Helper()
				u := find[*unstructured.Unstructured](rendered, name)
				if u == nil || u.GetKind() != monitor.kind {
					t.Fatalf("no %s %s in %v", monitor.kind, name, deploytest.KindNames(rendered.objs))
				}
				eps, _, _ := unstructured.NestedSlice(u.Object, "spec", monitor.endpoints)
				if len(eps) != 1 {
					t.Fatalf("%s %s: %d endpoints, want 1", monitor.kind, name, len(eps))
				}
				d, err := time.ParseDuration(eps[0].(map[string]any)["interval"].(string))
				if err != nil {
					t.Fatalf("%s %s: %v", monitor.kind, name, err)
				}
				return d
			}
			exp, rem := interval("guard-emptydir-exporter"), interval("guard-emptydir-remediator")
			if exp%collection != 0 || exp > max(5*time.Second, collection) {
				t.Errorf("exporter scraped every %v: want a multiple of its --collection.interval=%v, at most 5s or that interval", exp, collection)
			}
			if exp < collection {
				t.Errorf("exporter scraped every %v, faster than its --collection.interval=%v: the extra scrapes repeat its samples", exp, collection)
			}
			// The alert's own evaluation interval: below half the exporter's scrape, so
			// the wait from the scrape to the firing evaluation is not a second scrape.
			if ev := overLimitEvaluation(t); ev == 0 || 2*ev > exp {
				t.Errorf("EmptyDirOverLimit evaluated every %v (0: the global interval): want its own, at most half the exporter's %v scrape", ev, exp)
			}
			if rem != 30*time.Second {
				t.Errorf("remediator scraped every %v, want 30s", rem)
			}
		})
	}
}
