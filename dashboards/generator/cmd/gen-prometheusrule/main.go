// Command gen-prometheusrule writes rules/prometheusrule.yaml, the Prometheus Operator
// PrometheusRule equivalent of rules/emptydir-guard.rules.yml. Run it from dashboards/generator:
//
//	go run ./cmd/gen-prometheusrule
//	go run ./cmd/gen-prometheusrule -runbook-base https://wiki.example/emptydir -out - | kubectl apply -f -
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/emptydir-guard/emptydir-guard/dashboards/generator/internal/promrule"
)

func main() {
	def := promrule.DefaultOptions()
	in := flag.String("in", "../../rules/emptydir-guard.rules.yml", "plain Prometheus rule file")
	out := flag.String("out", "../../rules/prometheusrule.yaml", "PrometheusRule manifest to write, - for stdout")
	name := flag.String("name", def.Name, "metadata.name")
	namespace := flag.String("namespace", def.Namespace, "metadata.namespace (empty: none)")
	runbook := flag.String("runbook-base", promrule.DefaultRunbookBase, "base URL of docs/runbook.md in runbook_url annotations")
	flag.Parse()

	data, err := os.ReadFile(*in)
	if err != nil {
		fail(err)
	}
	o := def
	o.Name, o.Namespace, o.RunbookBase = *name, *namespace, *runbook
	manifest, err := promrule.Generate(data, o)
	if err != nil {
		fail(fmt.Errorf("%s: %w", *in, err))
	}
	if *out == "-" {
		os.Stdout.Write(manifest)
		return
	}
	if err := os.WriteFile(*out, manifest, 0o644); err != nil {
		fail(err)
	}
	fmt.Println("wrote", *out)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "gen-prometheusrule:", err)
	os.Exit(1)
}
