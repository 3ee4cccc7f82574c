// Command alignmodules raises a test-tool module's requirements to the product's version of
// every module both build, so that the tool's packages compile to the same build-cache entries
// as the product's (same toolchain, CGO_ENABLED=0, -trimpath): a cold `make test` compiles
// client-go and its family once, not once per module. Where the tool needs a newer version than
// the product, it keeps it. `make generate` runs it, so check-generated fails when a bump of the
// product's go.mod leaves a tool module behind.
//
//	go run ./alignmodules PRODUCT_DIR MODULE_DIR[:KEEP_PREFIX,...]...
//
// A module directory may name path prefixes to leave alone after a colon
// (test/prometheus:k8s.io/,sigs.k8s.io/): modules a pinned tool cannot build with at the
// product's versions.
package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"

	"golang.org/x/mod/semver"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: alignmodules PRODUCT_DIR MODULE_DIR...")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2:]); err != nil {
		fmt.Fprintln(os.Stderr, "alignmodules:", err)
		os.Exit(1)
	}
}

func run(product string, modules []string) error {
	want, err := versions(product)
	if err != nil {
		return err
	}
	for _, arg := range modules {
		dir, keepList, _ := strings.Cut(arg, ":")
		var keep []string
		if keepList != "" {
			keep = strings.Split(keepList, ",")
		}
		have, err := versions(dir)
		if err != nil {
			return err
		}
		raise := raises(want, have, keep)
		if len(raise) == 0 {
			continue
		}
		args := []string{"mod", "edit"}
		for _, r := range raise {
			args = append(args, "-require="+r)
		}
		if err := gocmd(dir, args...); err != nil {
			return err
		}
		if err := gocmd(dir, "mod", "tidy"); err != nil {
			return err
		}
	}
	return nil
}

// raises lists, sorted, path@version for each module the tool selects at an older version than
// the product, but those under a kept prefix.
func raises(product, tool map[string]string, keep []string) []string {
	var out []string
	for path, v := range tool {
		if w, ok := product[path]; ok && semver.Compare(w, v) > 0 && !hasAnyPrefix(path, keep) {
			out = append(out, path+"@"+w)
		}
	}
	slices.Sort(out)
	return out
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// versions lists the selected version of every module in dir's build list but its own.
func versions(dir string) (map[string]string, error) {
	cmd := exec.Command("go", "list", "-m", "-f", "{{if not .Main}}{{.Path}} {{.Version}}{{end}}", "all")
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -m all in %s: %w", dir, err)
	}
	v := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if path, version, ok := strings.Cut(sc.Text(), " "); ok && version != "" {
			v[path] = version
		}
	}
	return v, sc.Err()
}

func gocmd(dir string, args ...string) error {
	cmd := exec.Command("go", args...) //nolint:gosec // G204: go mod edit/tidy with module paths from go list, run by make generate
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go %s in %s: %w", strings.Join(args, " "), dir, err)
	}
	return nil
}
