package cliflag

import (
	"bytes"
	"fmt"
	"os"
	"strings"

	"github.com/alecthomas/kingpin/v2"

	"github.com/emptydir-guard/emptydir-guard/internal/docsection"
)

// Table renders the visible flags of app as a Markdown table, from the flag set itself so
// that the documentation cannot drift from the command.
func Table(app *kingpin.Application) string {
	var b strings.Builder
	b.WriteString("| flag | default | meaning |\n| --- | --- | --- |\n")
	for _, f := range app.Model().Flags {
		if f.Hidden || f.Name == "help" || f.Name == "version" {
			continue
		}
		name := "`--" + f.Name + "`"
		if f.Envar != "" {
			name += " (env `" + f.Envar + "`)"
		}
		def := ""
		if len(f.Default) > 0 && strings.Join(f.Default, "") != "" {
			def = "`" + strings.Join(f.Default, "`, `") + "`"
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", name, def, cell(f.Help))
	}
	return b.String()
}

// cell keeps a help text inside its table cell.
func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}

// UpdateDoc sets section of the Markdown file at path to the flag table of app and reports
// whether the file changed: the command's test regenerates the doc and fails while the
// committed one is stale.
func UpdateDoc(path, section, generator string, app *kingpin.Application) (changed bool, err error) {
	body := Table(app)
	before, err := os.ReadFile(path)
	if err != nil {
		return false, fmt.Errorf("cliflag: %w", err)
	}
	if err := docsection.Replace(path, section, generator, body); err != nil {
		return false, err
	}
	after, err := os.ReadFile(path)
	if err != nil {
		return false, fmt.Errorf("cliflag: %w", err)
	}
	return !bytes.Equal(before, after), nil
}
