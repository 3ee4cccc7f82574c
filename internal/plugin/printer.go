package plugin

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
)

// Format is how a command prints, as -o chose.
type Format int

// The output formats.
const (
	// FormatTable is -o left out: a table (explain: its text).
	FormatTable Format = iota
	// FormatWide is -o wide: the table with its wide columns.
	FormatWide
	// FormatObject is one of cli-runtime's formats, kubectl's own set (json, yaml, name,
	// jsonpath, go-template, ...): Options.Print prints the command's Object with it.
	FormatObject
	// FormatCustom is a format the command prints itself (recommend's patch).
	FormatCustom
)

// APIVersion is the apiVersion of the objects -o json|yaml prints, so that a script can tell
// their shape as it tells a Kubernetes object's. They are not served by any API server.
const APIVersion = "emptydir-guard.io/v1alpha1"

// TypeMeta is the apiVersion and kind of an object of ours named kind.
func TypeMeta(kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: APIVersion, Kind: kind}
}

// Object is what a command prints for cli-runtime's formats: a document with apiVersion and
// kind, and the Kubernetes objects its rows are about, for -o name.
type Object interface {
	runtime.Object
	Refs() []Ref
}

// Ref names a Kubernetes object as -o name prints it (kind.group/name, as kubectl get does).
type Ref struct{ Group, Kind, Name string }

// GroupOf is the API group of the built-in workload kinds the plugin names ("" for the core
// group and for a kind it does not know).
func GroupOf(kind string) string {
	switch kind {
	case "Deployment", "StatefulSet", "DaemonSet", "ReplicaSet":
		return "apps"
	case "Job", "CronJob":
		return "batch"
	}
	return ""
}

// refList is refs, each once, as the list cli-runtime's name printer takes.
func refList(refs []Ref) *unstructured.UnstructuredList {
	l := &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": "v1", "kind": "List"}}
	seen := map[Ref]bool{}
	for _, r := range refs {
		if seen[r] {
			continue
		}
		seen[r] = true
		u := unstructured.Unstructured{}
		u.SetGroupVersionKind(schema.GroupVersionKind{Group: r.Group, Version: "v1", Kind: r.Kind})
		u.SetName(r.Name)
		l.Items = append(l.Items, u)
	}
	return l
}

// newPrintFlags are kubectl's -o formats, from cli-runtime, bound to o's fields.
func (o *Options) newPrintFlags() *genericclioptions.PrintFlags {
	p := genericclioptions.NewPrintFlags("")
	p.OutputFormat = &o.Output
	p.OutputFlagSpecified = func() bool { return o.Output != "" }
	t := p.TemplatePrinterFlags
	t.TemplateArgument, t.GoTemplatePrintFlags.TemplateArgument, t.JSONPathPrintFlags.TemplateArgument = &o.Template, &o.Template, &o.Template
	t.AllowMissingKeys, t.GoTemplatePrintFlags.AllowMissingKeys, t.JSONPathPrintFlags.AllowMissingKeys = &o.AllowMissingKeys, &o.AllowMissingKeys, &o.AllowMissingKeys
	return p
}

// outputFormats are the values -o takes for a command with its own formats own: kubectl's
// order (cli-runtime's, then a table's wide) with own's added.
func (o *Options) outputFormats(own []string) []string {
	return append(o.newPrintFlags().AllowedFormats(), own...)
}

// Format is how the running command prints, as -o (and --template) ask; own are the formats
// the command prints itself beside cli-runtime's ("wide" for a table with wide columns,
// "patch"). A format the command does not take, or a template that does not parse, is a
// usage error, with kubectl's wording.
func (o *Options) Format(own ...string) (Format, error) {
	switch {
	case o.Output == "" && o.Template == "":
		return FormatTable, nil
	case o.Output == "wide" && slices.Contains(own, "wide"):
		return FormatWide, nil
	case o.Output != "" && slices.Contains(own, o.Output):
		return FormatCustom, nil
	}
	if _, err := o.newPrintFlags().ToPrinter(); err != nil {
		if genericclioptions.IsNoCompatiblePrinterError(err) {
			allowed := slices.Sorted(slices.Values(o.outputFormats(own)))
			return 0, UsageError(fmt.Errorf("unable to match a printer suitable for the output format %q, allowed formats are: %s", o.Output, strings.Join(allowed, ",")))
		}
		return 0, UsageError(err)
	}
	return FormatObject, nil
}

// Print prints as f says: the table t, or obj with cli-runtime's printer of -o (for -o name,
// the objects obj's rows are about, each once).
func (o *Options) Print(f Format, t *Table, obj Object) error {
	switch f {
	case FormatTable, FormatWide:
		return PrintTable(o.Out, t, f == FormatWide, o.NoHeaders)
	case FormatObject:
		p, err := o.newPrintFlags().ToPrinter()
		if err != nil {
			return UsageError(err)
		}
		if strings.EqualFold(o.Output, "name") {
			return p.PrintObj(refList(obj.Refs()), o.Out)
		}
		return p.PrintObj(obj, o.Out)
	}
	return fmt.Errorf("output format %q is the command's own, not the shared printer's", o.Output)
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

// PrintTable writes t to w, its wide columns only if wide.
func PrintTable(w io.Writer, t *Table, wide, noHeaders bool) error {
	// kubectl's own table layout (printers.GetNewTabWriter): left-aligned columns three
	// spaces apart, so that scripts which cut kubectl's tables cut ours alike.
	tw := tabwriter.NewWriter(w, 6, 4, 3, ' ', 0)
	keep := make([]bool, len(t.Columns))
	for i, c := range t.Columns {
		keep[i] = !c.Wide || wide
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
