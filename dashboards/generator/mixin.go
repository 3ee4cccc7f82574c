package main

import (
	"os"
	"path/filepath"

	"github.com/emptydir-guard/emptydir-guard/dashboards/generator/internal/promrule"
)

// The monitoring mixin (mixin/, for jsonnet-bundler users) imports generated copies of the
// rules and the dashboards: mixin/mixin.libsonnet is written by hand, everything else there
// by MixinFiles.
const (
	rulesSource       = "rules/emptydir-guard.rules.yml"
	mixinRules        = "rules.json"
	mixinDashboardDir = "dashboards"
)

// MixinFiles returns the generated files of the mixin, named relative to its directory:
// rules.json (the groups of the rule file rules, as JSON) and dashboards/<name>.json (the
// dashboards, byte for byte as in dashboards/).
func MixinFiles(rules []byte, dashboards []File) ([]File, error) {
	data, err := promrule.MixinJSON(rules)
	if err != nil {
		return nil, err
	}
	files := []File{{Name: mixinRules, Data: data}}
	for _, d := range dashboards {
		files = append(files, File{Name: filepath.ToSlash(filepath.Join(mixinDashboardDir, d.Name)), UID: d.UID, Data: d.Data})
	}
	return files, nil
}

// writeMixin writes the mixin's generated files into dir and removes the dashboards there
// that the generator no longer builds.
func writeMixin(dir string, files []File) ([]string, error) {
	if err := os.MkdirAll(filepath.Join(dir, mixinDashboardDir), 0o755); err != nil {
		return nil, err
	}
	keep := map[string]bool{}
	var written []string
	for _, f := range files {
		path := filepath.Join(dir, filepath.FromSlash(f.Name))
		keep[path] = true
		if err := os.WriteFile(path, f.Data, 0o644); err != nil {
			return written, err
		}
		written = append(written, path)
	}
	stale, err := filepath.Glob(filepath.Join(dir, mixinDashboardDir, "*.json"))
	if err != nil {
		return written, err
	}
	for _, path := range stale {
		if !keep[path] {
			if err := os.Remove(path); err != nil {
				return written, err
			}
		}
	}
	return written, nil
}
