// Package ocimage builds the release image of emptyDir guard without Docker: an OCI image
// layout holding a multi-arch image index (one image per platform, both commands at
// /usr/local/bin on a minimal non-root base with CA certificates and no shell) and, per platform
// image, an SPDX 2.3 SBOM attached as an OCI 1.1 referrer. Every byte follows from the inputs
// (the binaries, the CA bundle, the version, the revision and the source date epoch): the same
// inputs give the same digests.
package ocimage

import (
	"bytes"
	"debug/elf"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Commands are the commands every platform's image holds, at /usr/local/bin; the first is the
// image's entrypoint.
var Commands = []string{"emptydir-exporter", "emptydir-remediator"}

// DefaultCABundle is where Debian's ca-certificates package keeps its bundle.
const DefaultCABundle = "/etc/ssl/certs/ca-certificates.crt"

// Platform is a target of a Go build: GOOS and GOARCH.
type Platform struct {
	OS, Arch string
}

func (p Platform) String() string { return p.OS + "/" + p.Arch }

// elfMachines are the architectures an image can be built for, with the ELF machine of their
// binaries.
var elfMachines = map[string]elf.Machine{
	"amd64":   elf.EM_X86_64,
	"arm64":   elf.EM_AARCH64,
	"ppc64le": elf.EM_PPC64,
	"riscv64": elf.EM_RISCV,
	"s390x":   elf.EM_S390,
}

// PlatformBinaries names the directory holding the commands built for one platform.
type PlatformBinaries struct {
	Platform Platform
	Dir      string
}

// Options are the inputs of an image build.
type Options struct {
	// Binaries, one entry per platform, sorted by platform.
	Binaries        []PlatformBinaries
	Version         string // the version the binaries carry: labels, annotations, SBOM, tag
	Revision        string // the git commit
	SourceDateEpoch int64  // every timestamp of the image (seconds since 1970, UTC)
	CABundle        string // the PEM bundle installed at /etc/ssl/certs/ca-certificates.crt
	Out             string // the OCI image layout directory to write
}

// maxEpoch is the largest modification time a USTAR tar header holds (11 octal digits).
const maxEpoch = 1<<33 - 1

// tagPattern is the grammar of an OCI tag (distribution spec): the version is the index's
// org.opencontainers.image.ref.name in the layout, and the image's tag when published.
var tagPattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$`)

// ParseOptions reads the command line; getenv supplies SOURCE_DATE_EPOCH when
// --source-date-epoch is not given. It only parses and checks the values themselves (see
// CheckInputs for the files they name) and touches nothing. -h prints the usage to usage and
// returns flag.ErrHelp.
func ParseOptions(args []string, getenv func(string) string, usage io.Writer) (Options, error) {
	var o Options
	fs := flag.NewFlagSet("ocimage", flag.ContinueOnError)
	fs.SetOutput(usage)
	binaries := fs.String("binaries", "", "the commands built per platform: `os/arch=dir[,os/arch=dir...]`, each dir holding "+strings.Join(Commands, " and "))
	fs.StringVar(&o.Version, "version", "", "the version the binaries carry (make version): labels, annotations, SBOM and the layout's tag")
	fs.StringVar(&o.Revision, "revision", "", "the git commit the binaries were built from")
	epoch := fs.String("source-date-epoch", getenv("SOURCE_DATE_EPOCH"), "every timestamp in the image, in `seconds` since 1970 (default: $SOURCE_DATE_EPOCH; make image: the commit time)")
	fs.StringVar(&o.CABundle, "ca-bundle", DefaultCABundle, "the PEM bundle of CA certificates to install at "+DefaultCABundle+" (Debian's ca-certificates)")
	fs.StringVar(&o.Out, "out", "", "the OCI image layout `directory` to write (replaced if it holds one)")
	fs.Usage = func() {
		fmt.Fprintf(usage, "Usage: ocimage --binaries os/arch=dir,... --version V --revision R --out DIR [flags]\n\n"+
			"Writes the multi-arch OCI image of emptyDir guard and an SPDX SBOM per platform to DIR,\n"+
			"prints the image index's digest.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return Options{}, err
	}
	var errs []error
	if fs.NArg() > 0 {
		errs = append(errs, fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	bins, err := parseBinaries(*binaries)
	if err != nil {
		errs = append(errs, err)
	}
	o.Binaries = bins
	switch {
	case o.Version == "":
		errs = append(errs, errors.New("--version is empty"))
	case !tagPattern.MatchString(o.Version):
		errs = append(errs, fmt.Errorf("--version %q is not a valid image tag ([A-Za-z0-9_][A-Za-z0-9._-]{0,127})", o.Version))
	}
	if strings.TrimSpace(o.Revision) == "" {
		errs = append(errs, errors.New("--revision is empty"))
	}
	if *epoch == "" {
		errs = append(errs, errors.New("--source-date-epoch is not set and SOURCE_DATE_EPOCH is empty"))
	} else {
		// Up to 8^11-1 (in 2242): the largest time of a USTAR tar header.
		n, err := strconv.ParseInt(*epoch, 10, 64)
		if err != nil || n < 0 || n > maxEpoch {
			errs = append(errs, fmt.Errorf("--source-date-epoch %q: want whole seconds since 1970, 0 to %d", *epoch, maxEpoch))
		}
		o.SourceDateEpoch = n
	}
	if o.CABundle == "" {
		errs = append(errs, errors.New("--ca-bundle is empty"))
	}
	if o.Out == "" {
		errs = append(errs, errors.New("--out is empty"))
	}
	if err := errors.Join(errs...); err != nil {
		return Options{}, err
	}
	return o, nil
}

// parseBinaries parses os/arch=dir[,os/arch=dir...] into entries sorted by platform.
func parseBinaries(s string) ([]PlatformBinaries, error) {
	if strings.TrimSpace(s) == "" {
		return nil, errors.New("--binaries is empty: want os/arch=dir[,os/arch=dir...]")
	}
	var out []PlatformBinaries
	var errs []error
	seen := map[Platform]bool{}
	for item := range strings.SplitSeq(s, ",") {
		spec, dir, ok := strings.Cut(item, "=")
		osName, arch, ok2 := strings.Cut(spec, "/")
		switch {
		case !ok || !ok2 || dir == "" || osName == "" || arch == "":
			errs = append(errs, fmt.Errorf("--binaries: %q: want os/arch=dir", item))
			continue
		case osName != "linux":
			errs = append(errs, fmt.Errorf("--binaries: %q: only linux images are built", item))
			continue
		case elfMachines[arch] == elf.EM_NONE:
			errs = append(errs, fmt.Errorf("--binaries: %q: unsupported architecture %q (supported: %s)", item, arch, strings.Join(slices.Sorted(maps.Keys(elfMachines)), ", ")))
			continue
		}
		p := Platform{OS: osName, Arch: arch}
		if seen[p] {
			errs = append(errs, fmt.Errorf("--binaries: platform %s given twice", p))
			continue
		}
		seen[p] = true
		out = append(out, PlatformBinaries{Platform: p, Dir: dir})
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b PlatformBinaries) int { return strings.Compare(a.Platform.String(), b.Platform.String()) })
	return out, nil
}

// CheckInputs checks the files the options name before anything is written: every command of
// every platform is a static ELF executable for that platform's architecture, the CA bundle
// holds PEM certificates, and --out is either absent, empty or an OCI image layout (which is
// then replaced). It reports every problem found, not just the first.
func CheckInputs(o Options) error {
	var errs []error
	for _, pb := range o.Binaries {
		for _, c := range Commands {
			if err := checkBinary(filepath.Join(pb.Dir, c), pb.Platform); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", pb.Platform, err))
			}
		}
	}
	if ca, err := os.ReadFile(o.CABundle); err != nil {
		errs = append(errs, fmt.Errorf("--ca-bundle: %w (Debian's ca-certificates package: make deps)", err))
	} else if !bytes.Contains(ca, []byte("-----BEGIN CERTIFICATE-----")) {
		errs = append(errs, fmt.Errorf("--ca-bundle %s holds no PEM certificate", o.CABundle))
	}
	if err := checkOut(o.Out); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func checkBinary(path string, p Platform) error {
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("missing command: %w", err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", path)
	}
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("%s is not an ELF executable: %w", path, err)
	}
	defer f.Close()
	if want := elfMachines[p.Arch]; f.Machine != want || f.Class != elf.ELFCLASS64 {
		return fmt.Errorf("%s is built for %v (%v), not %s (%v)", path, f.Machine, f.Class, p.Arch, want)
	}
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return fmt.Errorf("%s is an ELF %v, not an executable", path, f.Type)
	}
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked (build with CGO_ENABLED=0): the image has no libc", path)
		}
	}
	return nil
}

func checkOut(out string) error {
	entries, err := os.ReadDir(out)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("--out: %w", err)
	case len(entries) == 0:
		return nil
	}
	if _, err := os.Stat(filepath.Join(out, "oci-layout")); err != nil {
		return fmt.Errorf("--out %s exists and is not an OCI image layout: refusing to replace it", out)
	}
	return nil
}
