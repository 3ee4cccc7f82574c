// Command gen-deploy writes the generated files around the Helm chart: the chart's copies of
// rules/prometheusrule.yaml and dashboards/*.json, the kustomize base (deploy/exporter.yaml,
// deploy/remediator.yaml, the components' manifests) rendered from the chart with
// deploy/helm/kustomize-base-values.yaml, and the values table of the chart's README from its
// values.yaml. `make generate` runs it after the generators of the rules and dashboards; by
// hand, from test/helm:
//
//	go run ./cmd/gen-deploy
package main

import (
	"flag"
	"fmt"
	"os"

	helmchart "github.com/emptydir-guard/emptydir-guard/test/helm"
)

func main() {
	root := flag.String("root", "../..", "the repository root")
	flag.Parse()
	changed, err := helmchart.WriteGenerated(*root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen-deploy:", err)
		os.Exit(1)
	}
	for _, f := range changed {
		fmt.Println("wrote", f)
	}
}
