package ocimage

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// ReleaseOptions are the inputs of `ocirelease push` and `ocirelease check`.
type ReleaseOptions struct {
	Command   string          // push or check
	Layout    string          // push: the image layout directory
	Repo      name.Repository // push: where to
	Image     name.Reference  // check: what
	Platforms []Platform      // check: the platforms a release has
	PlainHTTP bool            // talk HTTP to the registry (a test's registry on loopback)
}

const releaseUsage = `Usage:
  ocirelease push  --layout DIR --repository REGISTRY/REPO [--plain-http]
      pushes the image index of an image layout (make image) under its tag, and its SBOMs;
      prints REGISTRY/REPO@sha256:... (what to sign)
  ocirelease check --image REF --platforms "os/arch ..." [--plain-http]
      fails unless REF is an image index with a valid image and an SBOM for every platform

Credentials: the Docker config (~/.docker/config.json, $DOCKER_CONFIG), as docker login writes it.
`

// ParseReleaseOptions reads the command line of ocirelease; it only parses and checks the values
// and touches nothing. -h prints the usage to usage and returns flag.ErrHelp.
func ParseReleaseOptions(args []string, usage io.Writer) (ReleaseOptions, error) {
	var o ReleaseOptions
	if len(args) == 0 || (args[0] != "push" && args[0] != "check") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
			fmt.Fprint(usage, releaseUsage)
			return o, flag.ErrHelp
		}
		return o, errors.New("want a command, push or check (-h for help)")
	}
	o.Command = args[0]
	fs := flag.NewFlagSet("ocirelease "+o.Command, flag.ContinueOnError)
	fs.SetOutput(usage)
	fs.Usage = func() { fmt.Fprint(usage, releaseUsage) }
	fs.BoolVar(&o.PlainHTTP, "plain-http", false, "talk plain HTTP to the registry")
	var repo, image, platforms string
	if o.Command == "push" {
		fs.StringVar(&o.Layout, "layout", "", "the OCI image layout `directory` make image wrote")
		fs.StringVar(&repo, "repository", "", "the `repository` to push to, REGISTRY/NAME")
	} else {
		fs.StringVar(&image, "image", "", "the published image, REGISTRY/NAME:TAG or @sha256:...")
		fs.StringVar(&platforms, "platforms", "", "the `platforms` a release has, os/arch separated by spaces or commas")
	}
	if err := fs.Parse(args[1:]); err != nil {
		return ReleaseOptions{}, err
	}
	nameOpts := []name.Option{name.StrictValidation}
	if o.PlainHTTP {
		nameOpts = append(nameOpts, name.Insecure)
	}
	var errs []error
	if fs.NArg() > 0 {
		errs = append(errs, fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	switch o.Command {
	case "push":
		if o.Layout == "" {
			errs = append(errs, errors.New("--layout is empty"))
		}
		r, err := name.NewRepository(repo, nameOpts...)
		if err != nil {
			errs = append(errs, fmt.Errorf("--repository %q: %w", repo, err))
		}
		o.Repo = r
	case "check":
		r, err := name.ParseReference(image, nameOpts...)
		if err != nil {
			errs = append(errs, fmt.Errorf("--image %q: %w", image, err))
		}
		o.Image = r
		for p := range strings.FieldsFuncSeq(platforms, func(r rune) bool { return r == ' ' || r == ',' }) {
			osName, arch, ok := strings.Cut(p, "/")
			if !ok || osName == "" || arch == "" {
				errs = append(errs, fmt.Errorf("--platforms: %q: want os/arch", p))
				continue
			}
			o.Platforms = append(o.Platforms, Platform{OS: osName, Arch: arch})
		}
		if len(o.Platforms) == 0 && strings.Trim(platforms, " ,") == "" {
			errs = append(errs, errors.New("--platforms is empty"))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return ReleaseOptions{}, err
	}
	return o, nil
}

// RunRelease is the ocirelease command. It returns the exit status: 0, 1 when the push or the
// check fails, 2 for bad flags.
func RunRelease(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := ParseReleaseOptions(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "ocirelease: %v\n", err)
		return 2
	}
	auth := remote.WithAuthFromKeychain(authn.DefaultKeychain)
	switch o.Command {
	case "push":
		p, err := Push(ctx, o.Layout, o.Repo, auth)
		if err != nil {
			fmt.Fprintf(stderr, "ocirelease: %v\n", err)
			return 1
		}
		fmt.Fprintf(stderr, "ocirelease: pushed %s (%s) and %d SBOMs\n", p.Tag, p.Index.DigestStr(), len(p.SBOMs))
		fmt.Fprintln(stdout, p.Index)
	case "check":
		d, err := Check(ctx, o.Image, o.Platforms, auth)
		if err != nil {
			fmt.Fprintf(stderr, "ocirelease: %v\n", err)
			return 1
		}
		fmt.Fprintf(stderr, "ocirelease: %s is a release for %s\n", o.Image, platformList(o.Platforms))
		fmt.Fprintln(stdout, d)
	}
	return 0
}

func platformList(ps []Platform) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}
