package ocimage

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

// Run is the ocimage command: it parses args, checks the inputs, writes the layout, reports
// what it wrote on stderr and prints the image index's digest on stdout. It returns the exit
// status: 0, 1 when the build fails, 2 for bad flags.
func Run(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	o, err := ParseOptions(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "ocimage: %v\n", err)
		return 2
	}
	if err := CheckInputs(o); err != nil {
		fmt.Fprintf(stderr, "ocimage: %v\n", err)
		return 1
	}
	res, err := Build(o)
	if err != nil {
		fmt.Fprintf(stderr, "ocimage: %v\n", err)
		return 1
	}
	fmt.Fprintf(stderr, "ocimage: %s: OCI image layout, tag %s\n", res.Out, o.Version)
	fmt.Fprintf(stderr, "  image index %s\n", res.Index.Digest)
	for i, img := range res.Images {
		fmt.Fprintf(stderr, "  %-14s image %s, SBOM %s\n", img.Platform.OS+"/"+img.Platform.Architecture, img.Digest, res.SBOMs[i].Digest)
	}
	fmt.Fprintln(stdout, res.Index.Digest)
	return 0
}
