// Command gen-deploy writes the generated files around the Helm chart: the chart's copies of
// rules/prometheusrule.yaml and dashboards/*.json, the kustomize base (deploy/exporter.yaml,
// deploy/remediator.yaml, the components' manifests) rendered from the chart with
// deploy/helm/kustomize-base-values.yaml, and the values table of the chart's README from its
// values.yaml (and the types of values.schema.json), saying how many values have no comment.
// `make generate` runs it after the generators of the rules and dashboards; by hand, from
// test/helm:
//
//	go run ./cmd/gen-deploy [-v]
package main

import (
	"flag"
	"fmt"
	"os"

	helmchart "github.com/emptydir-guard/emptydir-guard/test/helm"
)

func main() {
	root := flag.String("root", "../..", "the repository root")
	verbose := flag.Bool("v", false, "list the values of values.yaml that have no description")
	flag.Parse()
	changed, err := helmchart.WriteGenerated(*root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen-deploy:", err)
		os.Exit(1)
	}
	for _, f := range changed {
		fmt.Println("wrote", f)
	}
	// Said on every run (make generate, not make check-generated, shows it): a value whose
	// key has no comment has an empty description in the chart README.
	doc, err := helmchart.ChartValuesDoc(*root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen-deploy:", err)
		os.Exit(1)
	}
	if n := len(doc.Undocumented); n > 0 {
		fmt.Printf("%s: %d of %d values have no comment (nor a schema description), so no description in %s (-v lists them)\n",
			helmchart.ChartPath+"/values.yaml", n, doc.Values, helmchart.ChartReadme)
		if *verbose {
			for _, v := range doc.Undocumented {
				fmt.Println("  " + v)
			}
		}
	}
}
