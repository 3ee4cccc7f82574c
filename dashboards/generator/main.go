// Command generator builds the emptyDir guard Grafana dashboards as code and writes them to
// dashboards/*.json. Run it from this folder:
//
//	cd dashboards/generator && go run .
//
// The tests fail when the committed JSON differs from what this program generates.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	out := flag.String("out", "..", "folder the dashboard JSON files are written to")
	flag.Parse()
	files, err := Render()
	if err != nil {
		fmt.Fprintln(os.Stderr, "generator:", err)
		os.Exit(1)
	}
	for _, f := range files {
		path := filepath.Join(*out, f.Name)
		if err := os.WriteFile(path, f.Data, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "generator:", err)
			os.Exit(1)
		}
		fmt.Println("wrote", path)
	}
}
