package main

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"slices"
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

// TestPluginDocFlags: docs/kubectl-plugin.md's table of commands names each command's flags,
// no more and no fewer.
func TestPluginDocFlags(t *testing.T) {
	doc, err := os.ReadFile("../../docs/kubectl-plugin.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(doc), "| command | its flags |\n")
	table, _, _ = strings.Cut(table, "\n\n")
	if !ok {
		t.Fatal("docs/kubectl-plugin.md: no table of the commands' flags")
	}
	rows := map[string]string{}
	for _, line := range strings.Split(table, "\n") {
		if cells := strings.Split(line, "|"); len(cells) == 4 && strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			use := strings.Trim(strings.TrimSpace(cells[1]), "`")
			rows[strings.Fields(use)[0]] = cells[2]
		}
	}
	root := newRootCmd(genericiooptions.NewTestIOStreamsDiscard())
	for _, c := range root.Commands() {
		if c.Name() == "help" || c.Name() == "completion" {
			continue
		}
		row, ok := rows[c.Name()]
		if !ok {
			t.Errorf("docs/kubectl-plugin.md: no row for %s", c.Name())
			continue
		}
		var want []string
		c.LocalNonPersistentFlags().VisitAll(func(f *pflag.Flag) {
			if f.Hidden || f.Name == "help" {
				return
			}
			name := "`--" + f.Name + "`"
			if f.Shorthand != "" {
				name = "`-" + f.Shorthand + "`"
			}
			want = append(want, name)
		})
		got := regexp.MustCompile("`-[^`]*`").FindAllString(row, -1)
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("docs/kubectl-plugin.md names %q for %s, its flags are %q", got, c.Name(), want)
		}
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
