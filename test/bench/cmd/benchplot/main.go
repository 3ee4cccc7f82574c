// Command benchplot draws the benchmark figures of docs/performance.md as SVG plots: it reads
// the tables the bench targets generate there (internal/docsection's sections) and writes one
// plot per figure, the same bytes for the same tables. `make bench-plots` runs it, and every
// bench target that writes a plotted section runs that afterwards.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "benchplot:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("benchplot", flag.ContinueOnError)
	doc := fs.String("doc", "docs/performance.md", "the Markdown file holding the generated sections")
	out := fs.String("out", "docs/img", "directory the SVG files are written to")
	if err := fs.Parse(args); err != nil {
		return err
	}
	text, err := os.ReadFile(*doc)
	if err != nil {
		return err
	}
	plots, err := renderAll(string(text))
	if err != nil {
		return fmt.Errorf("%s: %w", *doc, err)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	for _, f := range figures {
		if err := os.WriteFile(filepath.Join(*out, f.File), plots[f.File], 0o644); err != nil {
			return err
		}
	}
	return nil
}

// renderAll draws every figure from the document's text, file name → SVG; it fails before
// any file is written when one section cannot be read.
func renderAll(doc string) (map[string][]byte, error) {
	plots := map[string][]byte{}
	for _, f := range figures {
		s, err := parseSection(doc, f.Section)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.File, err)
		}
		c, err := f.Build(s)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.File, err)
		}
		svg, err := render(c)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.File, err)
		}
		plots[f.File] = svg
	}
	return plots, nil
}
