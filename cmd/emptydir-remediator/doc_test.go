package main

import (
	"testing"

	"github.com/emptydir-guard/emptydir-guard/internal/cliflag"
)

// TestFlagsDoc keeps the flag table of docs/flags.md generated from the flag set: it
// regenerates the table and fails while the committed one differs.
func TestFlagsDoc(t *testing.T) {
	t.Setenv("KUBECONFIG", "")
	c := defaultConfig()
	changed, err := cliflag.UpdateDoc("../../docs/flags.md", "flags-remediator", "go test ./cmd/emptydir-remediator: TestFlagsDoc", newApp(&c))
	if err != nil {
		t.Fatal(err)
	}
	if changed {
		t.Error("docs/flags.md did not match the flags; it is regenerated now: commit it")
	}
}
