package helmchart_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	monv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	monv1alpha1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/emptydir-guard/emptydir-guard/deploy/deploytest"
	"github.com/emptydir-guard/emptydir-guard/remediator"
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
// (collected every 30s), or a collectionInterval set, the exporter is scraped at its collection
// interval, not faster.
func TestMonitorIntervals(t *testing.T) {
	for _, monitor := range []struct{ name, values, kind, endpoints string }{
		{"PodMonitor", "podMonitor: {enabled: true}", "PodMonitor", "podMetricsEndpoints"},
		{"ServiceMonitor", "serviceMonitor: {enabled: true}", "ServiceMonitor", "endpoints"},
		{"PodMonitor/kubelet-source", "{podMonitor: {enabled: true}, exporter: {source: kubelet}}", "PodMonitor", "podMetricsEndpoints"},
		{"ServiceMonitor/kubelet-source", "{serviceMonitor: {enabled: true}, exporter: {source: kubelet}}", "ServiceMonitor", "endpoints"},
		{"PodMonitor/collectionInterval", "{podMonitor: {enabled: true}, exporter: {collectionInterval: 10s}}", "PodMonitor", "podMetricsEndpoints"},
		{"ServiceMonitor/collectionInterval", "{serviceMonitor: {enabled: true}, exporter: {collectionInterval: 15s}}", "ServiceMonitor", "endpoints"},
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
			endpoints := func(name string) []any {
				t.Helper()
				u := find[*unstructured.Unstructured](rendered, name)
				if u == nil || u.GetKind() != monitor.kind {
					t.Fatalf("no %s %s in %v", monitor.kind, name, deploytest.KindNames(rendered.objs))
				}
				eps, _, _ := unstructured.NestedSlice(u.Object, "spec", monitor.endpoints)
				return eps
			}
			interval := func(ep any) time.Duration {
				t.Helper()
				d, err := time.ParseDuration(ep.(map[string]any)["interval"].(string))
				if err != nil {
					t.Fatal(err)
				}
				return d
			}
			// The exporter's series the over-limit alerts compare at the fast interval,
			// the rest at the slow one, under a job of its own.
			eps := endpoints("guard-emptydir-exporter")
			if len(eps) != 2 {
				t.Fatalf("%s guard-emptydir-exporter: %d endpoints, want 2 (the trigger series, the rest)", monitor.kind, len(eps))
			}
			if p, _, _ := unstructured.NestedStringSlice(eps[0].(map[string]any), "params", "collect[]"); !slices.Equal(p, []string{"trigger"}) {
				t.Errorf("the exporter's first endpoint selects collect[]=%v, want [trigger]", p)
			}
			if p, _, _ := unstructured.NestedStringSlice(eps[1].(map[string]any), "params", "exclude[]"); !slices.Equal(p, []string{"trigger"}) {
				t.Errorf("the exporter's second endpoint selects exclude[]=%v, want [trigger]", p)
			}
			if slow := interval(eps[1]); slow != 30*time.Second {
				t.Errorf("the exporter's other series scraped every %v, want 30s", slow)
			}
			relabels, _, _ := unstructured.NestedSlice(eps[1].(map[string]any), "relabelings")
			if last := relabels[len(relabels)-1].(map[string]any); last["targetLabel"] != "job" || !strings.HasSuffix(last["replacement"].(string), "emptydir-exporter-slow") {
				t.Errorf("the slow endpoint's last relabeling is %v, want the job <...>emptydir-exporter-slow", last)
			}
			rems := endpoints("guard-emptydir-remediator")
			if len(rems) != 1 {
				t.Fatalf("%s guard-emptydir-remediator: %d endpoints, want 1", monitor.kind, len(rems))
			}
			exp, rem := interval(eps[0]), interval(rems[0])
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

// TestMonitorsHonorTheExporterLabels: the exporter's volume series carry the measured pod's
// namespace and pod, which the operator's target labels (the exporter pod's) would otherwise
// overwrite (renaming them exported_*): its endpoints honour them. The remediator's series
// have no such label, and its endpoints keep the operator's default.
func TestMonitorsHonorTheExporterLabels(t *testing.T) {
	for _, monitor := range []struct{ values, kind, endpoints string }{
		{"podMonitor: {enabled: true}", "PodMonitor", "podMetricsEndpoints"},
		{"serviceMonitor: {enabled: true}", "ServiceMonitor", "endpoints"},
	} {
		t.Run(monitor.kind, func(t *testing.T) {
			r := release("guard")
			if err := yaml.Unmarshal([]byte(monitor.values), &r.Values); err != nil {
				t.Fatal(err)
			}
			rendered := render(t, r)
			for name, want := range map[string]bool{"guard-emptydir-exporter": true, "guard-emptydir-remediator": false} {
				u := find[*unstructured.Unstructured](rendered, name)
				if u == nil || u.GetKind() != monitor.kind {
					t.Fatalf("no %s %s", monitor.kind, name)
				}
				eps, _, _ := unstructured.NestedSlice(u.Object, "spec", monitor.endpoints)
				for _, e := range eps {
					if got, _ := e.(map[string]any)["honorLabels"].(bool); got != want {
						t.Errorf("%s %s: honorLabels %v, want %v", monitor.kind, name, got, want)
					}
				}
			}
		})
	}
}

// TestAlertmanagerConfig: the chart's AlertmanagerConfig is the route of
// deploy/alertmanager/alertmanager.yml to the remediator's Service, with the token of the
// Secret the remediator reads and a webhook timeout above one alert's worst case.
func TestAlertmanagerConfig(t *testing.T) {
	r := release("guard")
	r.Values = map[string]any{"alertmanagerConfig": map[string]any{"enabled": true, "labels": map[string]any{"alertmanagerConfig": "emptydir-guard"}},
		"prometheusRule": map[string]any{"enabled": true}}
	rendered := render(t, r)
	u := find[*unstructured.Unstructured](rendered, "guard-emptydir-remediator")
	for _, o := range rendered.objs {
		if v, ok := o.(*unstructured.Unstructured); ok && v.GetKind() == "AlertmanagerConfig" {
			u = v
		}
	}
	if u == nil || u.GetKind() != "AlertmanagerConfig" || u.GetAPIVersion() != "monitoring.coreos.com/v1alpha1" {
		t.Fatalf("no AlertmanagerConfig guard-emptydir-remediator in %v", deploytest.KindNames(rendered.objs))
	}
	if u.GetName() != "guard-emptydir-remediator" || u.GetNamespace() != "guard" || u.GetLabels()["alertmanagerConfig"] != "emptydir-guard" {
		t.Errorf("AlertmanagerConfig %s/%s labels %v", u.GetNamespace(), u.GetName(), u.GetLabels())
	}
	var spec struct {
		Route struct {
			Receiver       string `json:"receiver"`
			GroupBy        []string
			GroupWait      string
			GroupInterval  string
			RepeatInterval string
			Matchers       []struct{ Name, Value, MatchType string }
		}
		Receivers []struct {
			Name           string
			WebhookConfigs []struct {
				URL          string
				SendResolved *bool
				MaxAlerts    int
				Timeout      string
				HTTPConfig   struct {
					Authorization struct {
						Type        string
						Credentials struct{ Name, Key string }
					}
				}
			}
		}
	}
	js, _ := json.Marshal(u.Object["spec"])
	if err := json.Unmarshal(js, &spec); err != nil {
		t.Fatal(err)
	}
	// The example's route: the same matcher, grouping and timers; the grouping also by
	// pod_namespace, which the routing copies (EmptyDirRemediationRoute) carry.
	example := exampleRemediatorRoute(t)
	rt := spec.Route
	if len(rt.Matchers) != 1 || fmt.Sprintf("%s%s%q", rt.Matchers[0].Name, rt.Matchers[0].MatchType, rt.Matchers[0].Value) != example.Matchers[0] ||
		!slices.Equal(slices.DeleteFunc(slices.Clone(rt.GroupBy), func(l string) bool { return l == "pod_namespace" }), example.GroupBy) ||
		!slices.Contains(rt.GroupBy, "pod_namespace") || rt.GroupWait != example.GroupWait || rt.GroupInterval != example.GroupInterval ||
		rt.RepeatInterval != example.RepeatInterval {
		t.Errorf("route %+v, the example's %+v", rt, example)
	}
	if len(spec.Receivers) != 1 || spec.Receivers[0].Name != rt.Receiver || len(spec.Receivers[0].WebhookConfigs) != 1 {
		t.Fatalf("receivers %+v", spec.Receivers)
	}
	w := spec.Receivers[0].WebhookConfigs[0]
	// The URL names the remediator's Service and port, and the remediator's webhook path.
	svc := find[*corev1.Service](rendered, "guard-emptydir-remediator")
	if svc == nil || w.URL != fmt.Sprintf("http://%s.guard.svc:%d%s", svc.Name, svc.Spec.Ports[0].Port, remediator.DefaultConfig().WebhookPath) {
		t.Errorf("webhook URL %s", w.URL)
	}
	if w.SendResolved == nil || *w.SendResolved || w.MaxAlerts != 20 {
		t.Errorf("sendResolved %v, maxAlerts %d: want false and 20 as in the example", w.SendResolved, w.MaxAlerts)
	}
	d := deploytest.RemediatorDeployment(t, rendered.objs, "guard-emptydir-remediator")
	var secret, key string
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == "webhook-token" {
			secret, key = v.Secret.SecretName, v.Secret.Items[0].Key
		}
	}
	if a := w.HTTPConfig.Authorization; a.Type != "Bearer" || a.Credentials.Name != secret || a.Credentials.Key != key {
		t.Errorf("authorization %+v, the remediator reads key %q of Secret %q", a, key, secret)
	}
	timeout, err := time.ParseDuration(w.Timeout)
	groupInterval, err2 := time.ParseDuration(rt.GroupInterval)
	if err != nil || err2 != nil || timeout <= remediator.DefaultConfig().AlertTimeout || timeout >= groupInterval {
		t.Errorf("webhook timeout %s: want above --web.alert-timeout %v and below groupInterval %s", w.Timeout, remediator.DefaultConfig().AlertTimeout, rt.GroupInterval)
	}

	// TLS on the remediator: https, with the client TLS the values give.
	r.Values = map[string]any{"alertmanagerConfig": map[string]any{"enabled": true, "matcherStrategy": "None", "tlsConfig": map[string]any{"serverName": "remediator"}},
		"remediator": map[string]any{"webConfig": map[string]any{"tls_server_config": map[string]any{"cert_file": "/c", "key_file": "/k"}}}}
	js, _ = json.Marshal(find[*unstructured.Unstructured](render(t, r), "guard-emptydir-remediator").Object["spec"])
	if !strings.Contains(string(js), `"url":"https://guard-emptydir-remediator.guard.svc:9732/webhook"`) || !strings.Contains(string(js), `"tlsConfig":{"serverName":"remediator"}`) {
		t.Errorf("with TLS: %s", js)
	}
}

type exampleRoute struct {
	Receiver       string   `json:"receiver"`
	Matchers       []string `json:"matchers"`
	GroupBy        []string `json:"group_by"`
	GroupWait      string   `json:"group_wait"`
	GroupInterval  string   `json:"group_interval"`
	RepeatInterval string   `json:"repeat_interval"`
}

// exampleRemediatorRoute is the route to the remediator in deploy/alertmanager/alertmanager.yml.
func exampleRemediatorRoute(t *testing.T) exampleRoute {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "deploy/alertmanager/alertmanager.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Route struct {
			Routes []exampleRoute `json:"routes"`
		} `json:"route"`
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	for _, r := range cfg.Route.Routes {
		if r.Receiver == "emptydir-remediator" {
			return r
		}
	}
	t.Fatal("no route to emptydir-remediator in deploy/alertmanager/alertmanager.yml")
	return exampleRoute{}
}

// TestMonitorsDecodeAsTheOperatorsTypes: every Prometheus Operator object the chart renders,
// with every monitor value set, decodes strictly into the operator's own Go types (v0.85, the
// version the real-cluster tests run): a misspelt or misplaced field, which the operator's
// CRD would prune or refuse, fails here. And the sample limits land on the monitors they name.
func TestMonitorsDecodeAsTheOperatorsTypes(t *testing.T) {
	for _, monitor := range []string{"podMonitor", "serviceMonitor"} {
		t.Run(monitor, func(t *testing.T) {
			r := release("guard")
			values := monitor + `: {enabled: true, exporterInterval: 10s, interval: 1m, scrapeTimeout: 4s, exporterSampleLimit: 5000, sampleLimit: 800, labels: {release: kps}}
prometheusRule: {enabled: true}
alertmanagerConfig: {enabled: true}`
			if err := yaml.Unmarshal([]byte(values), &r.Values); err != nil {
				t.Fatal(err)
			}
			limits := map[string]uint64{}
			decoded := 0
			for _, o := range render(t, r).objs {
				u, ok := o.(*unstructured.Unstructured)
				if !ok || u.GroupVersionKind().Group != "monitoring.coreos.com" {
					continue
				}
				var into any
				switch u.GetKind() {
				case "PodMonitor":
					into = &monv1.PodMonitor{}
				case "ServiceMonitor":
					into = &monv1.ServiceMonitor{}
				case "PrometheusRule":
					into = &monv1.PrometheusRule{}
				case "AlertmanagerConfig":
					into = &monv1alpha1.AlertmanagerConfig{}
				default:
					t.Fatalf("%s %s: a kind this test does not know", u.GetKind(), u.GetName())
				}
				raw, err := json.Marshal(u.Object)
				if err != nil {
					t.Fatal(err)
				}
				dec := json.NewDecoder(bytes.NewReader(raw))
				dec.DisallowUnknownFields()
				if err := dec.Decode(into); err != nil {
					t.Errorf("%s %s does not decode as the operator's type: %v", u.GetKind(), u.GetName(), err)
				}
				decoded++
				switch m := into.(type) {
				case *monv1.PodMonitor:
					limits[m.Name] = ptr.Deref(m.Spec.SampleLimit, 0)
				case *monv1.ServiceMonitor:
					limits[m.Name] = ptr.Deref(m.Spec.SampleLimit, 0)
				}
			}
			if want := map[string]uint64{"guard-emptydir-exporter": 5000, "guard-emptydir-remediator": 800}; decoded != 4 || !maps.Equal(limits, want) {
				t.Errorf("decoded %d operator objects (want 4), sample limits %v, want %v", decoded, limits, want)
			}
		})
	}
}

// TestExporterScrapedOnceWithoutSlowInterval: exporterSlowInterval "" scrapes every series of
// the exporter in one endpoint at exporterInterval, without a collector selection.
func TestExporterScrapedOnceWithoutSlowInterval(t *testing.T) {
	for _, monitor := range []struct{ values, kind, endpoints string }{
		{`podMonitor: {enabled: true, exporterSlowInterval: ""}`, "PodMonitor", "podMetricsEndpoints"},
		{`serviceMonitor: {enabled: true, exporterSlowInterval: ""}`, "ServiceMonitor", "endpoints"},
	} {
		t.Run(monitor.kind, func(t *testing.T) {
			r := release("guard")
			if err := yaml.Unmarshal([]byte(monitor.values), &r.Values); err != nil {
				t.Fatal(err)
			}
			u := find[*unstructured.Unstructured](render(t, r), "guard-emptydir-exporter")
			if u == nil || u.GetKind() != monitor.kind {
				t.Fatalf("no %s guard-emptydir-exporter", monitor.kind)
			}
			eps, _, _ := unstructured.NestedSlice(u.Object, "spec", monitor.endpoints)
			if len(eps) != 1 {
				t.Fatalf("%d endpoints, want 1", len(eps))
			}
			ep := eps[0].(map[string]any)
			if ep["params"] != nil || ep["interval"] != "5s" {
				t.Errorf("the endpoint has params %v and interval %v, want none and 5s", ep["params"], ep["interval"])
			}
		})
	}
}
