package helmchart_test

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/emptydir-guard/emptydir-guard/deploy"
	"github.com/emptydir-guard/emptydir-guard/deploy/deploytest"
	helmchart "github.com/emptydir-guard/emptydir-guard/test/helm"
)

// root is the repository root, seen from this package's directory.
const root = "../.."

// rendered is one rendering of the chart, decoded strictly into typed objects.
type rendered struct {
	files map[string]string
	objs  []runtime.Object
	ns    string // the release namespace
}

// allowed: the release's RBAC lets its ServiceAccount sa do a.
func (r rendered) allowed(sa string, a authorizationv1.ResourceAttributes) bool {
	return deploytest.Allowed(r.objs, r.ns, sa, a)
}

// allowedAnywhere: the release's RBAC lets sa do a in some namespace or cluster-wide.
func (r rendered) allowedAnywhere(sa string, a authorizationv1.ResourceAttributes) bool {
	return deploytest.AllowedAnywhere(r.objs, r.ns, sa, a)
}

func render(t *testing.T, r helmchart.Release) rendered {
	t.Helper()
	files, err := helmchart.Render(root, r)
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	var objs []runtime.Object
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if !strings.HasSuffix(name, ".yaml") {
			continue
		}
		o, err := deploy.Decode([]byte(files[name]))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		objs = append(objs, o...)
	}
	return rendered{files, objs, r.Namespace}
}

// find is the object of type T named name, or T's zero value.
func find[T runtime.Object](r rendered, name string) T {
	v, _ := deploy.Find[T](r.objs, name)
	return v
}

func valuesFile(name string) string {
	return filepath.Join(root, helmchart.ChartPath, "ci", name)
}

// release is release name in namespace guard with the chart's ci/ values files, rendered as
// helm template renders it: with the monitoring namespaces set, as without a cluster it must be.
func release(name string, files ...string) helmchart.Release {
	r := helmchart.Release{Name: name, Namespace: "guard", ValuesFiles: []string{filepath.Join("testdata", "monitoring-namespaces.yaml")}}
	for _, f := range files {
		r.ValuesFiles = append(r.ValuesFiles, valuesFile(f))
	}
	return r
}

// TestGeneratedFilesAreCurrent: deploy/ (the kustomize base) is what the chart renders with
// deploy/helm/kustomize-base-values.yaml, and the chart's copies of rules/ and dashboards/
// are current, so nothing is written twice by hand.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	files, err := helmchart.Generated(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		got, err := os.ReadFile(filepath.Join(root, name))
		if err != nil || !bytes.Equal(got, files[name]) {
			t.Errorf("%s is not what the chart generates (%v); run: make generate", name, err)
		}
	}
	// Every dashboard copy in the chart has its source.
	copied, err := filepath.Glob(filepath.Join(root, helmchart.ChartPath, "files/dashboards/*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range copied {
		rel, _ := filepath.Rel(root, c)
		if _, ok := files[filepath.ToSlash(rel)]; !ok {
			t.Errorf("%s has no source in dashboards/: remove it", rel)
		}
	}
}

// TestGeneratedRejectsAnUnmappedTemplate: a template the base values render but no file of
// deploy/ takes (say a NetworkPolicy added to the chart) fails the generation.
func TestGeneratedRejectsAnUnmappedTemplate(t *testing.T) {
	// A root with only what the generation reads: the chart, the rules, the dashboards.
	fake := t.TempDir()
	if err := os.CopyFS(filepath.Join(fake, "deploy/helm"), os.DirFS(filepath.Join(root, "deploy/helm"))); err != nil {
		t.Fatal(err)
	}
	inputs, err := filepath.Glob(filepath.Join(root, "dashboards/*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range append(inputs, filepath.Join(root, "rules/prometheusrule.yaml")) {
		rel, _ := filepath.Rel(root, f)
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(fake, filepath.Dir(rel)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(fake, rel), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := helmchart.Generated(fake); err != nil {
		t.Fatalf("the copied tree does not generate: %v", err)
	}
	extra := "{{- if .Values.exporter.enabled }}\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra\n{{- end }}\n"
	if err := os.WriteFile(filepath.Join(fake, helmchart.ChartPath, "templates/exporter/extra.yaml"), []byte(extra), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = helmchart.Generated(fake)
	if err == nil || !strings.Contains(err.Error(), "templates/exporter/extra.yaml") {
		t.Errorf("an unmapped template: err %v, want one naming it", err)
	}
}

func TestLint(t *testing.T) {
	files, err := filepath.Glob(valuesFile("*-values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 3 {
		t.Fatalf("only %d values files in ci/", len(files))
	}
	cases := map[string]helmchart.Release{
		"defaults": release("emptydir-guard"),
		"base":     helmchart.BaseRelease(root, nil),
	}
	for _, f := range files {
		cases[filepath.Base(f)] = release("guard", filepath.Base(f))
	}
	for name, r := range cases {
		t.Run(name, func(t *testing.T) {
			if err := helmchart.Lint(root, r); err != nil {
				t.Errorf("helm lint --strict: %v", err)
			}
		})
	}
}

// TestLintFailsOnBadValues: the lint checks the values against the schema (it is not a no-op).
func TestLintFailsOnBadValues(t *testing.T) {
	r := release("guard")
	r.Values = map[string]any{"exporter": map[string]any{"source": "kubelt"}}
	if err := helmchart.Lint(root, r); err == nil || !strings.Contains(err.Error(), "source") {
		t.Errorf("lint with exporter.source=kubelt: %v, want a schema error", err)
	}
}

func TestSchemaRejectsTypos(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values string
		want   string // in the error
	}{
		{"top-level typo", "remediatr: {enabled: false}", "remediatr"},
		{"nested typo", "exporter: {tolerration: []}", "tolerration"},
		{"flag typo", "remediator: {flags: {max-eviction: 3}}", "max-eviction"},
		{"unknown source", "exporter: {source: kubelt}", "source"},
		{"wrong type", "remediator: {replicas: two}", "replicas"},
		{"bad duration", "remediator: {flags: {cooldown: 10 minutes}}", "cooldown"},
		{"extraArgs not a flag", "exporter: {extraArgs: [collection.interval=1s]}", "extraArgs"},
		{"metric list entry with a comma", "exporter: {metricDenylist: ['go_.*,process_.*']}", "metricDenylist"},
		{"metric allowlist and denylist", "exporter: {metricAllowlist: [a], metricDenylist: [b]}", "mutually exclusive"},
		{"namespace not a name", "exporter: {namespaces: [Shop]}", "namespaces"},
		{"AlertmanagerConfig at OnNamespace without the PrometheusRule", "alertmanagerConfig: {enabled: true}", "needs prometheusRule.enabled"},
		{"ServiceMonitor without the Service", "{serviceMonitor: {enabled: true}, exporter: {service: {enabled: false}}}", "needs exporter.service.enabled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var v map[string]any
			if err := yaml.Unmarshal([]byte(tc.values), &v); err != nil {
				t.Fatal(err)
			}
			r := release("guard")
			r.Values = v
			_, err := helmchart.Render(root, r)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("values %s: err %v, want a schema error naming %q", tc.values, err, tc.want)
			}
		})
	}
	// The control: the same keys spelled right pass.
	r := release("guard")
	r.Values = map[string]any{"exporter": map[string]any{"tolerations": []any{}, "source": "kubelet", "extraArgs": []any{"--collection.interval=1s"}},
		"remediator": map[string]any{"replicas": 1, "flags": map[string]any{"eviction.max-global": 3, "eviction.cooldown": "10m"}}}
	if _, err := helmchart.Render(root, r); err != nil {
		t.Errorf("valid values rejected: %v", err)
	}
}

// TestKubeletSourceComponentMatchesTheChart: the kustomize component's patches (written by
// hand: a JSON patch is not a manifest the chart can render) give the exporter the arguments,
// and its PodMonitor the scrape interval, the chart gives them for exporter.source=kubelet.
func TestKubeletSourceComponentMatchesTheChart(t *testing.T) {
	k, err := deploy.ReadKustomization("components/kubelet-source")
	if err != nil {
		t.Fatal(err)
	}
	var patchedArgs []string
	var patchedInterval string
	for _, p := range k.Patches {
		var ops []struct {
			Path  string          `json:"path"`
			Value json.RawMessage `json:"value"`
		}
		if err := yaml.Unmarshal([]byte(p.Patch), &ops); err != nil {
			t.Fatal(err)
		}
		for _, op := range ops {
			switch {
			case p.Target.Kind == "DaemonSet" && op.Path == "/spec/template/spec/containers/0/args":
				err = json.Unmarshal(op.Value, &patchedArgs)
			case p.Target.Kind == "PodMonitor" && p.Target.Name == "emptydir-exporter" && op.Path == "/spec/podMetricsEndpoints/0/interval":
				err = json.Unmarshal(op.Value, &patchedInterval)
			}
			if err != nil {
				t.Fatalf("components/kubelet-source, patch of %s: %v", op.Path, err)
			}
		}
	}
	r := render(t, helmchart.BaseRelease(root, map[string]any{"exporter": map[string]any{"source": "kubelet"}, "podMonitor": map[string]any{"enabled": true}}))
	want := deploytest.ExporterDaemonSet(t, r.objs, "emptydir-exporter").Spec.Template.Spec.Containers[0].Args
	if !slices.Equal(patchedArgs, want) {
		t.Errorf("components/kubelet-source patches the exporter's args to\n %v\nthe chart renders for source kubelet\n %v", patchedArgs, want)
	}
	pm := find[*unstructured.Unstructured](r, "emptydir-exporter")
	if pm == nil || pm.GetKind() != "PodMonitor" {
		t.Fatalf("no PodMonitor emptydir-exporter in %v", deploytest.KindNames(r.objs))
	}
	eps, _, _ := unstructured.NestedSlice(pm.Object, "spec", "podMetricsEndpoints")
	if len(eps) != 2 {
		t.Fatalf("PodMonitor emptydir-exporter: %d endpoints, want 2 (the trigger series, the rest)", len(eps))
	}
	if want := eps[0].(map[string]any)["interval"]; patchedInterval != want {
		t.Errorf("components/kubelet-source patches the exporter's scrape interval to %q, the chart renders %v for source kubelet", patchedInterval, want)
	}
}
