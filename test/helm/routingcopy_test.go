package helmchart_test

import (
	"fmt"
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
// rules/emptydir-guard.rules.yml labelled remediation="evict", and with
// policy.evict-incomplete-after the two labelled "evict_incomplete".
var (
	remediationTriggers = []string{"EmptyDirOverLimit", "PodEphemeralStorageOverLimit", "ContainerEphemeralStorageOverLimit"}
	incompleteTriggers  = []string{"EmptyDirMeasurementIncomplete", "EmptyDirMeasurementIncomplete"}
)

const routingCopy = "EmptyDirRemediationRoute"

// withoutRoutingCopy returns a PrometheusRule's spec without the routing copies, and the copies
// by trigger, in the order of the rules (empty without any). Each copy must sit in its trigger's
// group, so that it is evaluated as often.
func withoutRoutingCopy(t *testing.T, spec any) (map[string]any, []map[string]any) {
	t.Helper()
	s, ok := deepCopy(t, spec).(map[string]any)
	if !ok {
		t.Fatalf("PrometheusRule spec %T", spec)
	}
	var copies []map[string]any
	for _, g := range s["groups"].([]any) {
		g := g.(map[string]any)
		groupAlerts := map[string]bool{}
		for _, r := range g["rules"].([]any) {
			if a, ok := r.(map[string]any)["alert"].(string); ok && a != routingCopy {
				groupAlerts[a] = true
			}
		}
		g["rules"] = slices.DeleteFunc(g["rules"].([]any), func(r any) bool {
			m := r.(map[string]any)
			if m["alert"] != routingCopy {
				return false
			}
			trigger, _ := m["labels"].(map[string]any)["trigger"].(string)
			if !groupAlerts[trigger] {
				t.Errorf("%s of %q in group %v, which lacks its trigger", routingCopy, trigger, g["name"])
			}
			copies = append(copies, m)
			return true
		})
	}
	return s, copies
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

// checkRoutingCopy: one copy per trigger in triggers, each its trigger's own expression (never a
// read of ALERTS, which a tenant can write) with the pod's namespace moved to pod_namespace and
// the release namespace ns left out, labelled namespace ns, for no one but the remediator.
func checkRoutingCopy(t *testing.T, copies []map[string]any, ns string, triggers ...string) {
	t.Helper()
	if len(triggers) == 0 {
		triggers = remediationTriggers
	}
	var got []string
	for _, c := range copies {
		labels, _ := c["labels"].(map[string]any)
		trigger, _ := labels["trigger"].(string)
		got = append(got, trigger)
		expr, _ := c["expr"].(string)
		if strings.Contains(expr, "ALERTS") {
			t.Errorf("%s of %s reads ALERTS: %q", routingCopy, trigger, expr)
		}
		for _, want := range []string{`"pod_namespace", "$1", "namespace", "(.*)"`, `unless on (namespace)`, `"namespace", "` + ns + `"`} {
			if !strings.Contains(expr, want) {
				t.Errorf("%s of %s: expr %q lacks %q", routingCopy, trigger, expr, want)
			}
		}
		if labels["namespace"] != ns || labels["severity"] != "none" || labels["pod_namespace"] != nil {
			t.Errorf("%s of %s: labels %v, want namespace %s, severity none, pod_namespace from the expression", routingCopy, trigger, labels, ns)
		}
	}
	if !slices.Equal(got, triggers) {
		t.Errorf("routing copies of %v, want of %v: under the matcher strategy OnNamespace only they reach the remediator", got, triggers)
	}
}

// TestRoutingCopy: the PrometheusRule carries the copies exactly when the AlertmanagerConfig's
// route needs them (matcher strategy OnNamespace), of the incomplete triggers too where the
// remediator acts on them, and the route takes what is copied; the rest of the PrometheusRule
// is rules/prometheusrule.yaml.
func TestRoutingCopy(t *testing.T) {
	allTriggers := append(slices.Clone(remediationTriggers), incompleteTriggers...)
	for _, tc := range []struct {
		values   string
		triggers []string // copied, nil: none
		matcher  string   // the AlertmanagerConfig's remediation matcher, "": none
	}{
		{"{prometheusRule: {enabled: true}}", nil, ""},
		{"{prometheusRule: {enabled: true}, alertmanagerConfig: {enabled: true}}", remediationTriggers, `remediation="evict"`},
		{"{prometheusRule: {enabled: true}, alertmanagerConfig: {enabled: true}, remediator: {flags: {policy.evict-incomplete-after: 1h}}}",
			allTriggers, `remediation=~"evict|evict_incomplete"`},
		{"{prometheusRule: {enabled: true}, alertmanagerConfig: {enabled: true}, remediator: {flags: {policy.evict-incomplete-after: 0s}}}",
			remediationTriggers, `remediation="evict"`},
		{"{prometheusRule: {enabled: true}, alertmanagerConfig: {enabled: true, matcherStrategy: None}}", nil, `remediation="evict"`},
		{"{prometheusRule: {enabled: true}, alertmanagerConfig: {enabled: true}, remediator: {enabled: false}}", nil, ""},
	} {
		t.Run(tc.values, func(t *testing.T) {
			_, route := routingCopyOf(t, tc.values)
			if got := len(route) > 0; got != (tc.triggers != nil) {
				t.Errorf("%s rules present %v, want %v", routingCopy, got, tc.triggers != nil)
			}
			if tc.triggers != nil {
				checkRoutingCopy(t, route, "guard", tc.triggers...)
			}
			if got := remediationMatcher(t, tc.values); got != tc.matcher {
				t.Errorf("AlertmanagerConfig route matcher %q, want %q", got, tc.matcher)
			}
		})
	}
}

// remediationMatcher renders the chart with values and returns its AlertmanagerConfig's
// remediation matcher as name, operator and value ("" without an AlertmanagerConfig).
func remediationMatcher(t *testing.T, values string) string {
	t.Helper()
	rel := release("guard")
	if err := yaml.Unmarshal([]byte(values), &rel.Values); err != nil {
		t.Fatal(err)
	}
	for _, o := range render(t, rel).objs {
		u, ok := o.(*unstructured.Unstructured)
		if !ok || u.GetKind() != "AlertmanagerConfig" {
			continue
		}
		matchers, _, _ := unstructured.NestedSlice(u.Object, "spec", "route", "matchers")
		for _, m := range matchers {
			if m := m.(map[string]any); m["name"] == "remediation" {
				return fmt.Sprintf("%s%s%q", m["name"], m["matchType"], m["value"])
			}
		}
		t.Fatalf("AlertmanagerConfig %s routes without a remediation matcher", u.GetName())
	}
	return ""
}

// routingCopyOf renders the chart with values and returns its PrometheusRule and routing copy.
func routingCopyOf(t *testing.T, values string) (*unstructured.Unstructured, []map[string]any) {
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

// TestRoutingCopyFires evaluates the chart's PrometheusRule with promtool: a copy fires with
// each trigger, in the release namespace and naming the pod's, in the same evaluation; never
// for a pod of the release namespace (its trigger is routed as it is). What a tenant writes
// into the Prometheus changes nothing: ALERTS series that differ only in a label the copy
// overwrites (a tenant's PrometheusRule with an alert named like a trigger; a scraped series
// named ALERTS) once made Prometheus fail the whole copy rule, so that no trigger of any
// namespace reached the remediator; the copies read no ALERTS.
func TestRoutingCopyFires(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not found (Debian package prometheus; make deps installs it): the routing copy is not evaluated")
	}
	pr, _ := routingCopyOf(t, "{prometheusRule: {enabled: true}, alertmanagerConfig: {enabled: true}, remediator: {flags: {policy.evict-incomplete-after: 1h}}}")
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
		otherUID  = "7d1e9a40-52c6-4f0b-8e3a-1b2c3d4e5f60"
		lowerUID  = "2a3b4c5d-6e7f-4081-9a2b-3c4d5e6f7081"
		runbook   = "https://github.com/emptydir-guard/emptydir-guard/blob/main/docs/runbook.md#"
	)
	hostile := func(extra string) string {
		return `ALERTS{alertname="EmptyDirOverLimit", alertstate="firing", remediation="evict", node="n1", namespace="tenant", pod="q", uid="` + otherUID + `", volume="v"` + extra + `}`
	}
	copyAnnotations := func(trigger, ns, pod, uid string) string {
		return `
            exp_annotations:
              summary: "Routes ` + trigger + ` of ` + ns + `/` + pod + ` to the emptydir-remediator."
              description: "A copy of the remediation trigger ` + trigger + ` (pod ` + ns + `/` + pod + `, uid ` + uid + `) in namespace guard, the only one the AlertmanagerConfig's route takes under the Alertmanager's matcher strategy OnNamespace; the pod's namespace is in label pod_namespace. Not for people: the trigger itself is."
              runbook_url: ` + runbook + `emptydirremediationroute`
	}
	tests := `rule_files: [rules.yml]
evaluation_interval: 2s
tests:
  - interval: 2s
    input_series:
      - series: 'emptydir_over_limit_bytes{node="n1", namespace="tenant", pod="p", uid="` + tenantUID + `", volume="v"}'
        values: '0+0x2 1024+0x5'
      - series: 'emptydir_pod_ephemeral_storage_over_limit_bytes{node="n1", namespace="guard", pod="own", uid="` + ownUID + `"}'
        values: '2048+0x7'
      # A tenant's PrometheusRule alerting under a trigger's name, twice but for severity.
      - series: '` + hostile(`, severity="a"`) + `'
        values: '1+0x7'
      - series: '` + hostile(`, severity="b"`) + `'
        values: '1+0x7'
      # A scraped series named ALERTS.
      - series: '` + hostile(`, job="tenant/app", instance="10.1.0.9:8080", trigger="x"`) + `'
        values: '1+0x7'
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
              remediation: evict` + copyAnnotations("EmptyDirOverLimit", "tenant", "p", tenantUID) + `
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
              runbook_url: ` + runbook + `podephemeralstorageoverlimit
  # EmptyDirMeasurementIncomplete, copied where the remediator acts on it, after its own 10m.
  - interval: 1m
    input_series:
      - series: 'emptydir_measurement_incomplete{node="n1", namespace="tenant", pod="p2", uid="` + lowerUID + `", volume="v", medium="disk", reason="unreadable"}'
        values: '1x12'
      - series: 'emptydir_limit_bytes{node="n1", namespace="tenant", pod="p2", uid="` + lowerUID + `", volume="v", medium="disk"}'
        values: '1048576x12'
    alert_rule_test:
      - eval_time: 9m
        alertname: ` + routingCopy + `
        exp_alerts: []
      - eval_time: 11m
        alertname: ` + routingCopy + `
        exp_alerts:
          - exp_labels:
              alertname: ` + routingCopy + `
              trigger: EmptyDirMeasurementIncomplete
              namespace: guard
              pod_namespace: tenant
              pod: p2
              uid: ` + lowerUID + `
              volume: v
              node: n1
              severity: none
              remediation: evict_incomplete` + copyAnnotations("EmptyDirMeasurementIncomplete", "tenant", "p2", lowerUID) + `
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
