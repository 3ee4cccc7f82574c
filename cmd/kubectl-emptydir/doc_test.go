package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/emptydir-guard/emptydir-guard/internal/docsection"
)

// TestFlagsDoc keeps the kubectl-emptydir section of docs/flags.md generated from the
// commands' flag sets: it regenerates it and fails while the committed one differs.
func TestFlagsDoc(t *testing.T) {
	const path = "../../docs/flags.md"
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	after, err := docsection.Apply(before, "flags-kubectl-emptydir", "go test ./cmd/kubectl-emptydir: TestFlagsDoc",
		flagsDoc(newRootCmd(genericiooptions.NewTestIOStreamsDiscard())))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		if err := os.WriteFile(path, after, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Error("docs/flags.md did not match the flags; it is regenerated now: commit it")
	}
}

// flagsDoc is the names of kubectl's flags, which every command takes, and a table per
// subcommand of the flags that apply to it.
func flagsDoc(root *cobra.Command) string {
	kubectl := pflag.NewFlagSet("kubectl", pflag.ContinueOnError)
	genericclioptions.NewConfigFlags(true).AddFlags(kubectl)
	var b strings.Builder
	var names []string
	kubectl.VisitAll(func(f *pflag.Flag) { names = append(names, "`--"+f.Name+"`") })
	b.WriteString("Every command takes kubectl's flags (" + strings.Join(names, ", ") + "; `kubectl emptydir options` lists them), and the flags that apply to it:\n")
	for _, c := range root.Commands() {
		if c.Hidden || c.Name() == "help" || c.Name() == "completion" || !c.HasLocalFlags() {
			continue
		}
		if table := flagTable(c.LocalNonPersistentFlags(), kubectl); table != "" {
			fmt.Fprintf(&b, "\n`%s`:\n\n%s", c.Name(), table)
		}
	}
	return b.String()
}

func flagTable(fs *pflag.FlagSet, skip *pflag.FlagSet) string {
	var rows []string
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden || f.Name == "help" || skip.Lookup(f.Name) != nil {
			return
		}
		name := "`--" + f.Name + "`"
		if f.Shorthand != "" {
			name = "`-" + f.Shorthand + "`, " + name
		}
		def := ""
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "[]" {
			def = "`" + f.DefValue + "`"
		}
		rows = append(rows, fmt.Sprintf("| %s | %s | %s |", name, def, strings.ReplaceAll(f.Usage, "|", `\|`)))
	})
	if len(rows) == 0 {
		return ""
	}
	return "| flag | default | meaning |\n| --- | --- | --- |\n" + strings.Join(rows, "\n") + "\n"
}
