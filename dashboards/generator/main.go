// Command generator builds the emptyDir guard Grafana dashboards as code and writes them to
// dashboards/*.json, and writes the generated files of the monitoring mixin (mixin/rules.json
// from rules/emptydir-guard.rules.yml, mixin/dashboards/*.json). Run it from this directory:
//
//	cd dashboards/generator && go run .
//
// The tests fail when the committed JSON differs from what this program generates.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	out := flag.String("out", "..", "directory the dashboard JSON files are written to")
	rules := flag.String("rules", filepath.Join("..", "..", rulesSource), "plain Prometheus rule file the mixin's rules.json is generated from")
	mixin := flag.String("mixin", filepath.Join("..", "..", "mixin"), "directory of the monitoring mixin, whose generated files are written (empty: none)")
	flag.Parse()
	files, err := Render()
	if err != nil {
		fail(err)
	}
	for _, f := range files {
		path := filepath.Join(*out, f.Name)
		if err := os.WriteFile(path, f.Data, 0o644); err != nil {
			fail(err)
		}
		fmt.Println("wrote", path)
	}
	if *mixin == "" {
		return
	}
	data, err := os.ReadFile(*rules)
	if err != nil {
		fail(err)
	}
	mixinFiles, err := MixinFiles(data, files)
	if err != nil {
		fail(fmt.Errorf("%s: %w", *rules, err))
	}
	written, err := writeMixin(*mixin, mixinFiles)
	for _, path := range written {
		fmt.Println("wrote", path)
	}
	if err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "generator:", err)
	os.Exit(1)
}
