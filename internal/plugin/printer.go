package plugin

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"sigs.k8s.io/yaml"
)

// Format is an output format of -o.
type Format int

// The output formats.
const (
	FormatTable Format = iota
	FormatWide
	FormatJSON
	FormatYAML
)

// FormatCustom is an output format one command adds and prints itself (OutputsAnnotation).
const FormatCustom Format = -1

// OutputsAnnotation, on a command, lists the output formats (comma-separated) that the command
// prints itself beside the shared ones, for example "patch": -o accepts them for that command
// only, and ParseOutput returns FormatCustom for them.
const OutputsAnnotation = "kubectl-emptydir.emptydir-guard.io/outputs"

// ParseOutput reads the value of -o; extra are the formats the command adds (OutputsAnnotation).
func ParseOutput(s string, extra ...string) (Format, error) {
	for _, e := range extra {
		if e != "" && s == e {
			return FormatCustom, nil
		}
	}
	switch s {
	case "":
		return FormatTable, nil
	case "wide":
		return FormatWide, nil
	case "json":
		return FormatJSON, nil
	case "yaml":
		return FormatYAML, nil
	}
	allowed := append([]string{"json", "wide", "yaml"}, extra...)
	slices.Sort(allowed)
	return 0, UsageError(fmt.Errorf("unable to match a printer suitable for the output format %q, allowed formats are: %s", s, strings.Join(slices.Compact(allowed), ", ")))
}

// Column is one column of a Table.
type Column struct {
	// Name is the header, upper case as kubectl prints it.
	Name string
	// Wide columns show only with -o wide.
	Wide bool
}

// Table is what a command prints for a person: one row per object, in the order given.
type Table struct {
	Columns []Column
	Rows    [][]string
}

// Add appends a row; its cells follow Columns, wide ones included.
func (t *Table) Add(cells ...string) { t.Rows = append(t.Rows, cells) }

// Print writes t (FormatTable, FormatWide) or v (FormatJSON, FormatYAML) to w. JSON and YAML
// carry everything; a table leaves the wide columns out unless asked for them.
func Print(w io.Writer, f Format, noHeaders bool, t *Table, v any) error {
	switch f {
	case FormatCustom:
		return errors.New("an output format of the command's own reached the shared printer")
	case FormatJSON:
		b, err := json.MarshalIndent(v, "", "    ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	case FormatYAML:
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	// kubectl's own table layout (printers.GetNewTabWriter): left-aligned columns three
	// spaces apart, so that scripts which cut kubectl's tables cut ours alike.
	tw := tabwriter.NewWriter(w, 6, 4, 3, ' ', 0)
	keep := make([]bool, len(t.Columns))
	for i, c := range t.Columns {
		keep[i] = !c.Wide || f == FormatWide
	}
	line := func(cells []string) {
		var out []string
		for i, c := range cells {
			if i < len(keep) && keep[i] {
				out = append(out, Printable(c)) // a tab or newline would break the columns too
			}
		}
		fmt.Fprintln(tw, strings.Join(out, "\t"))
	}
	if !noHeaders {
		names := make([]string, len(t.Columns))
		for i, c := range t.Columns {
			names[i] = c.Name
		}
		line(names)
	}
	for _, r := range t.Rows {
		line(r)
	}
	return tw.Flush()
}
