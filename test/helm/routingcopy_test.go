package helmchart_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/emptydir-guard/emptydir-guard/deploy/deploytest"
)

// The remediation triggers whose routing copies the chart makes: the alerts of
// rules/emptydir-guard.rules.yml labelled remediation="evict".
var remediationTriggers = []string{"EmptyDirOverLimit", "PodEphemeralStorageOverLimit", "ContainerEphemeralStorageOverLimit"}

const routingCopy = "EmptyDirRemediationRoute"

// withoutRoutingCopy returns a PrometheusRule's spec without the routing copy, and the copy
// (nil without one).
func withoutRoutingCopy(t *testing.T, spec any) (map[string]any, map[string]any) {
	t.Helper()
	s, ok := deepCopy(t, spec).(map[string]any)
	if !ok {
		t.Fatalf("PrometheusRule spec %T", spec)
	}
	var found map[string]any
	for _, g := range s["groups"].([]any) {
		g := g.(map[string]any)
		rules := g["rules"].([]any)
		g["rules"] = slices.DeleteFunc(rules, func(r any) bool {
			if m := r.(map[string]any); m["alert"] == routingCopy {
				if found != nil {
					t.Errorf("two %s rules", routingCopy)
				}
				if g["name"] != "emptydir-guard.remediation" {
					t.Errorf("%s in group %v, want the triggers' own (emptydir-guard.remediation, evaluated every 2s)", routingCopy, g["name"])
				}
				found = m
				return true
			}
			return false
		})
	}
	return s, found
}

func deepCopy(t *testing.T, v any) any {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := yaml.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkRoutingCopy: the copy selects the firing triggers outside the release namespace ns and
// puts them in ns, the pod's namespace in pod_namespace, for no one but the remediator.
func checkRoutingCopy(t *testing.T, copyRule map[string]any, ns string) {
	t.Helper()
	if copyRule == nil {
		t.Fatalf("no %s rule: under the matcher strategy OnNamespace no trigger reaches the remediator", routingCopy)
	}
	expr, _ := copyRule["expr"].(string)
	for _, want := range append([]string{`alertstate="firing"`, `remediation="evict"`, `namespace!="` + ns + `"`}, remediationTriggers...) {
		if !strings.Contains(expr, want) {
			t.Errorf("%s expr %q lacks %q", routingCopy, expr, want)
		}
	}
	labels, _ := copyRule["labels"].(map[string]any)
	if labels["namespace"] != ns || labels["pod_namespace"] != "{{ $labels.namespace }}" || labels["severity"] != "none" {
		t.Errorf("%s labels %v, want namespace %s, pod_namespace the trigger's namespace, severity none", routingCopy, labels, ns)
	}
}

// TestRoutingCopy: the PrometheusRule carries the copy exactly when the AlertmanagerConfig's
// route needs it (matcher strategy OnNamespace), and the rest of it is rules/prometheusrule.yaml.
func TestRoutingCopy(t *testing.T) {
	for _, tc := range []struct {
		values string
		want   bool
	}{
		{"{prometheusRule: {enabled: true}}", false},
		{"{prometheusRule: {enabled: true}, alertmanagerConfig: {enabled: true}}", true},
		{"{prometheusRule: {enabled: true}, alertmanagerConfig: {enabled: true, matcherStrategy: None}}", false},
		{"{prometheusRule: {enabled: true}, alertmanagerConfig: {enabled: true}, remediator: {enabled: false}}", false},
	} {
		t.Run(tc.values, func(t *testing.T) {
			_, route := routingCopyOf(t, tc.values)
			if got := route != nil; got != tc.want {
				t.Errorf("%s rule present %v, want %v", routingCopy, got, tc.want)
			}
			if tc.want {
				checkRoutingCopy(t, route, "guard")
			}
		})
	}
}

// routingCopyOf renders the chart with values and returns its PrometheusRule and routing copy.
func routingCopyOf(t *testing.T, values string) (*unstructured.Unstructured, map[string]any) {
	t.Helper()
	rel := release("guard")
	if err := yaml.Unmarshal([]byte(values), &rel.Values); err != nil {
		t.Fatal(err)
	}
	r := render(t, rel)
	var pr *unstructured.Unstructured
	for _, o := range r.objs {
		if u, ok := o.(*unstructured.Unstructured); ok && u.GetKind() == "PrometheusRule" {
			pr = u
		}
	}
	if pr == nil {
		t.Fatalf("no PrometheusRule in %v", deploytest.KindNames(r.objs))
	}
	spec, route := withoutRoutingCopy(t, pr.Object["spec"])
	b, err := os.ReadFile(filepath.Join(root, "rules/prometheusrule.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]any
	if err := yaml.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	if !equalYAML(t, spec, want["spec"]) {
		t.Errorf("the PrometheusRule's spec, but for %s, differs from rules/prometheusrule.yaml", routingCopy)
	}
	return pr, route
}

func equalYAML(t *testing.T, a, b any) bool {
	t.Helper()
	ya, err := yaml.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	yb, err := yaml.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return string(ya) == string(yb)
}

// TestRoutingCopyFires evaluates the chart's PrometheusRule with promtool: the copy fires
// with each trigger, in the release namespace and naming the pod's, in the same evaluation;
// never for a pod of the release namespace (its trigger is routed as it is) nor for an alert
// of the same name from someone else's rule without remediation="evict".
func TestRoutingCopyFires(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not found (Debian package prometheus; make deps installs it): the routing copy is not evaluated")
	}
	pr, _ := routingCopyOf(t, "{prometheusRule: {enabled: true}, alertmanagerConfig: {enabled: true}}")
	dir := t.TempDir()
	rules, err := yaml.Marshal(pr.Object["spec"])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rules.yml"), rules, 0o644); err != nil {
		t.Fatal(err)
	}
	const (
		tenantUID = "5cf142d1-7a2d-4698-a7e0-f6ebfc0d4b7d"
		ownUID    = "0b0f3a52-2f4e-4a8e-9d43-3c2f0f6f1e11"
	)
	tests := `rule_files: [rules.yml]
evaluation_interval: 2s
tests:
  - interval: 2s
    input_series:
      - series: 'emptydir_over_limit_bytes{node="n1", namespace="tenant", pod="p", uid="` + tenantUID + `", volume="v"}'
        values: '0+0x2 1024+0x5'
      - series: 'emptydir_pod_ephemeral_storage_over_limit_bytes{node="n1", namespace="guard", pod="own", uid="` + ownUID + `"}'
        values: '2048+0x7'
    alert_rule_test:
      - eval_time: 2s
        alertname: ` + routingCopy + `
        exp_alerts: []
      - eval_time: 10s
        alertname: ` + routingCopy + `
        exp_alerts:
          - exp_labels:
              alertname: ` + routingCopy + `
              trigger: EmptyDirOverLimit
              namespace: guard
              pod_namespace: tenant
              pod: p
              uid: ` + tenantUID + `
              volume: v
              node: n1
              severity: none
              remediation: evict
            exp_annotations:
              summary: "Routes EmptyDirOverLimit of tenant/p to the emptydir-remediator."
              description: "A copy of the remediation trigger EmptyDirOverLimit (pod tenant/p, uid ` + tenantUID + `) in namespace guard, the only one the AlertmanagerConfig's route takes under the Alertmanager's matcher strategy OnNamespace; the pod's namespace is in label pod_namespace. Not for people: the trigger itself is."
              runbook_url: https://github.com/emptydir-guard/emptydir-guard/blob/main/docs/runbook.md#emptydirremediationroute
      - eval_time: 10s
        alertname: PodEphemeralStorageOverLimit
        exp_alerts:
          - exp_labels:
              node: n1
              namespace: guard
              pod: own
              uid: ` + ownUID + `
              check: pod
              severity: critical
              remediation: evict
            exp_annotations:
              summary: "Pod guard/own is over its ephemeral-storage limit."
              description: "Pod guard/own (uid ` + ownUID + `, node n1) uses 2kiB more local ephemeral storage than its ephemeral-storage limit of (unknown) (its containers' limits added up). The emptydir-remediator re-measures it live and evicts the pod through the Eviction API."
              runbook_url: https://github.com/emptydir-guard/emptydir-guard/blob/main/docs/runbook.md#podephemeralstorageoverlimit
`
	if err := os.WriteFile(filepath.Join(dir, "tests.yml"), []byte(tests), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(promtool, "test", "rules", "tests.yml")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}
