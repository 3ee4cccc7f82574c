// Command ocimage writes the multi-arch OCI image layout of emptyDir guard (both commands on a
// minimal non-root base, with an SPDX SBOM per platform attached as an OCI 1.1 referrer) from
// binaries built beforehand. `make image` runs it; see the package's documentation.
package main

import (
	"os"

	"github.com/emptydir-guard/emptydir-guard/tools/ocimage"
)

func main() {
	os.Exit(run())
}

func run() int {
	return ocimage.Run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
}
