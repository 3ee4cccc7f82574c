package main

import (
	"testing"

	"github.com/emptydir-guard/emptydir-guard/internal/cliflag"
)

// TestFlagsDoc keeps the flag table of docs/flags.md generated from the flag set: it
// regenerates the table and fails while the committed one differs.
func TestFlagsDoc(t *testing.T) {
	clearEnv(t)
	cfg := defaultConfig()
	changed, err := cliflag.UpdateDoc("../../docs/flags.md", "flags-exporter", "go test ./cmd/emptydir-exporter: TestFlagsDoc", newApp(&cfg))
	if err != nil {
		t.Fatal(err)
	}
	if changed {
		t.Error("docs/flags.md did not match the flags; it is regenerated now: commit it")
	}
}
