package main

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-jsonnet"
	"sigs.k8s.io/yaml"

	"github.com/emptydir-guard/emptydir-guard/dashboards/generator/internal/promrule"
)

// The monitoring mixin (mixin/), evaluated with go-jsonnet as jsonnet and mixtool would.
const (
	mixinDir = repoRoot + "/mixin"
	// The matchers the shipped rules and dashboards use: the defaults of the mixin's _config.
	exporterMatcher   = `job=~".*emptydir-exporter.*"`
	remediatorMatcher = `job=~".*emptydir-remediator.*"`
	// EmptyDirExporterDown's description quotes the exporter's job regex; the mixin rewords it
	// for another selector.
	exporterPhrase = `whose job matches ".*emptydir-exporter.*"`
	// The mixin's three fields, as one object.
	mixinFields = `local m = %s;
{ alerts: m.prometheusAlerts, rules: m.prometheusRules, dashboards: m.grafanaDashboards }
`
)

// evalMixin evaluates mixin (a jsonnet expression) in a snippet named filename with an
// importer searching jpaths, and returns its alerts, rules and dashboards.
func evalMixin(t *testing.T, filename, mixin string, jpaths ...string) map[string]any {
	t.Helper()
	vm := jsonnet.MakeVM()
	vm.Importer(&jsonnet.FileImporter{JPaths: jpaths})
	out, err := vm.EvaluateAnonymousSnippet(filename, fmt.Sprintf(mixinFields, mixin))
	if err != nil {
		t.Fatalf("evaluating the mixin: %v", err)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// evalConfigured evaluates mixin/mixin.libsonnet with _config overridden by config (a
// jsonnet object, "{}" for the defaults), through an importer rooted at mixin/.
func evalConfigured(t *testing.T, config string) map[string]any {
	t.Helper()
	return evalMixin(t, "mixin_test.jsonnet", "(import 'mixin.libsonnet') + { _config+:: "+config+" }", mixinDir)
}

// groupsOf returns the rule groups of the mixin's field alerts or rules.
func groupsOf(t *testing.T, out map[string]any, field string) []any {
	t.Helper()
	obj, ok := out[field].(map[string]any)
	if !ok || len(obj) != 1 {
		t.Fatalf("%s: want an object with only groups, got %v", field, out[field])
	}
	groups, ok := obj["groups"].([]any)
	if !ok {
		t.Fatalf("%s.groups: want an array, got %T", field, obj["groups"])
	}
	return groups
}

// shippedRules returns the groups of rules/emptydir-guard.rules.yml as JSON values.
func shippedRules(t *testing.T) []any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, rulesSource))
	if err != nil {
		t.Fatal(err)
	}
	return yamlGroups(t, data, "groups")
}

// yamlGroups parses YAML and returns the array at the dotted path.
func yamlGroups(t *testing.T, data []byte, path string) []any {
	t.Helper()
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(js, &v); err != nil {
		t.Fatal(err)
	}
	for _, k := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("no %s", path)
		}
		v = m[k]
	}
	groups, ok := v.([]any)
	if !ok {
		t.Fatalf("%s: want an array, got %T", path, v)
	}
	return groups
}

// ruleKinds counts a group's alerting and recording rules.
func ruleKinds(group any) (name string, alerts, records int) {
	g, _ := group.(map[string]any)
	name, _ = g["name"].(string)
	rules, _ := g["rules"].([]any)
	for _, r := range rules {
		rule, _ := r.(map[string]any)
		if _, ok := rule["alert"]; ok {
			alerts++
		}
		if _, ok := rule["record"]; ok {
			records++
		}
	}
	return name, alerts, records
}

// reassemble puts the mixin's alert and recording groups back into the order of want's
// groups, checking that prometheusAlerts holds exactly the groups with alerts and
// prometheusRules exactly the recording groups.
func reassemble(t *testing.T, out map[string]any, want []any) []any {
	t.Helper()
	byName := map[string]any{}
	for _, field := range []string{"alerts", "rules"} {
		for _, g := range groupsOf(t, out, field) {
			name, alerts, records := ruleKinds(g)
			switch {
			case field == "alerts" && alerts == 0:
				t.Errorf("prometheusAlerts holds group %s, which has no alert", name)
			case field == "rules" && (alerts > 0 || records == 0):
				t.Errorf("prometheusRules holds group %s, which is not a recording group (%d alerts, %d records)", name, alerts, records)
			}
			if _, dup := byName[name]; dup {
				t.Errorf("group %s is in the mixin twice", name)
			}
			byName[name] = g
		}
	}
	if len(byName) != len(want) {
		t.Errorf("the mixin has %d rule groups, the rule file %d", len(byName), len(want))
	}
	var got []any
	for _, w := range want {
		name, _, _ := ruleKinds(w)
		g, ok := byName[name]
		if !ok {
			t.Errorf("group %s of the rule file is missing from the mixin", name)
			continue
		}
		got = append(got, g)
	}
	return got
}

// compareGroups reports each group of got that differs from want's.
func compareGroups(t *testing.T, got, want []any, how string) {
	t.Helper()
	if reflect.DeepEqual(got, want) {
		return
	}
	for i := range min(len(got), len(want)) {
		if reflect.DeepEqual(got[i], want[i]) {
			continue
		}
		name, _, _ := ruleKinds(want[i])
		// The rules that differ, or the whole group when its other fields or its length do.
		g, _ := got[i].(map[string]any)
		w, _ := want[i].(map[string]any)
		gotRules, _ := g["rules"].([]any)
		wantRules, _ := w["rules"].([]any)
		pairs := [][2]any{{got[i], want[i]}}
		if len(gotRules) == len(wantRules) && reflect.DeepEqual(without(g, "rules"), without(w, "rules")) {
			pairs = nil
			for j := range gotRules {
				if !reflect.DeepEqual(gotRules[j], wantRules[j]) {
					pairs = append(pairs, [2]any{gotRules[j], wantRules[j]})
				}
			}
		}
		for _, p := range pairs {
			gj, _ := json.MarshalIndent(p[0], "", "  ")
			wj, _ := json.MarshalIndent(p[1], "", "  ")
			t.Errorf("group %s differs from %s:\n--- mixin\n%s\n--- want\n%s", name, how, gj, wj)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d groups, want %d (%s)", len(got), len(want), how)
	}
}

// without returns m without the field k.
func without(m map[string]any, k string) map[string]any {
	out := make(map[string]any, len(m))
	for f, v := range m {
		if f != k {
			out[f] = v
		}
	}
	return out
}

// TestMixinRulesEqualShippedRules: with the default _config, prometheusAlerts and
// prometheusRules together are rules/emptydir-guard.rules.yml, split into the groups with
// alerts and the recording groups.
func TestMixinRulesEqualShippedRules(t *testing.T) {
	want := shippedRules(t)
	out := evalConfigured(t, "{}")
	compareGroups(t, reassemble(t, out, want), want, rulesSource+" (regenerate mixin/rules.json with: "+regenerate+")")
	for _, w := range want {
		name, alerts, records := ruleKinds(w)
		if alerts > 0 && records > 0 {
			t.Errorf("group %s mixes alerts and records: the mixin puts it under prometheusAlerts only", name)
		}
	}
}

// TestMixinDashboardsEqualGenerated: with the default _config, grafanaDashboards is
// dashboards/*.json, file for file.
func TestMixinDashboardsEqualGenerated(t *testing.T) {
	got, ok := evalConfigured(t, "{}")["dashboards"].(map[string]any)
	if !ok {
		t.Fatal("grafanaDashboards is no object")
	}
	paths, _ := filepath.Glob(filepath.Join(dashboardDir, "*.json"))
	if len(paths) == 0 {
		t.Fatal("no dashboards/*.json")
	}
	for _, p := range paths {
		name := filepath.Base(p)
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var want any
		if err := json.Unmarshal(data, &want); err != nil {
			t.Fatalf("dashboards/%s: %v", name, err)
		}
		d, ok := got[name]
		if !ok {
			t.Errorf("grafanaDashboards lacks %s: add it to mixin/mixin.libsonnet's dashboards", name)
			continue
		}
		if !reflect.DeepEqual(d, want) {
			t.Errorf("grafanaDashboards[%q] differs from dashboards/%s; regenerate with: %s", name, name, regenerate)
		}
		delete(got, name)
	}
	for name := range got {
		t.Errorf("grafanaDashboards has %s, which is no file of dashboards/", name)
	}
}

// stringsOf collects every string of v by its path (alerts/groups/3/rules/0/expr, ...).
func stringsOf(prefix string, v any, out map[string]string) {
	switch v := v.(type) {
	case string:
		out[prefix] = v
	case []any:
		for i, e := range v {
			stringsOf(prefix+"/"+strconv.Itoa(i), e, out)
		}
	case map[string]any:
		for k, e := range v {
			stringsOf(prefix+"/"+k, e, out)
		}
	}
}

// TestMixinSelectorOverrides: a selector set in _config replaces the shipped job matcher in
// every expression of the rules and dashboards that used it, and nowhere else.
func TestMixinSelectorOverrides(t *testing.T) {
	defaults := map[string]string{}
	stringsOf("", evalConfigured(t, "{}"), defaults)
	for _, tc := range []struct {
		field, matcher, selector string
		inRules                  bool // the rules use the matcher too, not only the dashboards
	}{
		{"exporterSelector", exporterMatcher, `job="edg-exp"`, true},
		{"remediatorSelector", remediatorMatcher, `job="edg-rem",namespace="ops"`, false},
	} {
		t.Run(tc.field, func(t *testing.T) {
			lit, _ := json.Marshal(tc.selector) // a JSON string is a jsonnet string
			got := map[string]string{}
			stringsOf("", evalConfigured(t, "{ "+tc.field+": "+string(lit)+" }"), got)
			if len(got) != len(defaults) {
				t.Errorf("%d strings with %s overridden, %d with the defaults", len(got), tc.field, len(defaults))
			}
			var changedRules, changedDashboards int
			paths := make([]string, 0, len(defaults))
			for p := range defaults {
				paths = append(paths, p)
			}
			sort.Strings(paths)
			for _, p := range paths {
				def, s := defaults[p], got[p]
				want := strings.ReplaceAll(def, tc.matcher, tc.selector)
				if tc.field == "exporterSelector" {
					want = strings.ReplaceAll(want, exporterPhrase, "matching {"+tc.selector+"}")
				}
				if s != want {
					t.Errorf("%s:\n got %q\nwant %q", p, s, want)
				}
				if strings.Contains(s, tc.matcher) {
					t.Errorf("%s still has the default %s: %q", p, tc.matcher, s)
				}
				if strings.HasSuffix(p, "/expr") && s != def {
					if strings.HasPrefix(p, "/dashboards/") {
						changedDashboards++
					} else {
						changedRules++
					}
				}
			}
			if tc.field == "exporterSelector" {
				for p, s := range got {
					if strings.Contains(s, `".*emptydir-exporter.*"`) {
						t.Errorf("%s still quotes the default job regex: %q", p, s)
					}
				}
			}
			t.Logf("%s changed %d rule and %d dashboard expressions", tc.field, changedRules, changedDashboards)
			if changedRules+changedDashboards == 0 {
				t.Errorf("no expression uses %s: the override proves nothing", tc.matcher)
			}
			if tc.inRules && changedRules == 0 {
				t.Errorf("no rule expression changed with %s", tc.field)
			}
		})
	}
}

// TestMixinRunbookURLBase: _config.runbookURLBase gives the rules that gen-prometheusrule
// -runbook-base gives.
func TestMixinRunbookURLBase(t *testing.T) {
	const base = "https://wiki.example/runbook/"
	plain, err := os.ReadFile(filepath.Join(repoRoot, rulesSource))
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := promrule.Generate(plain, promrule.Options{Name: "x", RunbookBase: base})
	if err != nil {
		t.Fatal(err)
	}
	want := yamlGroups(t, manifest, "spec.groups")
	out := evalConfigured(t, `{ runbookURLBase: "`+base+`" }`)
	compareGroups(t, reassemble(t, out, want), want, "gen-prometheusrule -runbook-base "+base)
	all := map[string]string{}
	stringsOf("", out, all)
	for p, s := range all {
		if strings.Contains(s, promrule.DefaultRunbookBase) {
			t.Errorf("%s still links the default runbook: %q", p, s)
		}
	}
}

// TestMixinVendored evaluates the mixin as jsonnet-bundler vendors it, only mixin/ copied to
// vendor/github.com/emptydir-guard/emptydir-guard/mixin and imported through -J vendor: its
// own imports resolve relative to mixin.libsonnet, as jsonnet resolves them, and need no file
// outside mixin/.
func TestMixinVendored(t *testing.T) {
	vendor := filepath.Join(t.TempDir(), "vendor")
	dst := filepath.Join(vendor, "github.com/emptydir-guard/emptydir-guard/mixin")
	err := filepath.WalkDir(mixinDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(mixinDir, path)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dst, rel)), 0o755); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
	entry := filepath.Join(filepath.Dir(vendor), "main.jsonnet")
	got := evalMixin(t, entry, "import 'github.com/emptydir-guard/emptydir-guard/mixin/mixin.libsonnet'", vendor)
	if want := evalConfigured(t, "{}"); !reflect.DeepEqual(got, want) {
		t.Error("the vendored mixin differs from mixin/ evaluated in place")
	}
}

// TestMixinFilesUpToDate fails when mixin/rules.json or mixin/dashboards/*.json differ from
// what the generator writes.
func TestMixinFilesUpToDate(t *testing.T) {
	plain, err := os.ReadFile(filepath.Join(repoRoot, rulesSource))
	if err != nil {
		t.Fatal(err)
	}
	built, err := Render()
	if err != nil {
		t.Fatal(err)
	}
	files, err := MixinFiles(plain, built)
	if err != nil {
		t.Fatal(err)
	}
	checkCommitted(t, mixinDir, "mixin", files, filepath.Join(mixinDashboardDir, "*.json"))
}
