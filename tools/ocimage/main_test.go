package ocimage

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The commands the tests put into images: real cross-compiled builds of the root module's
// ./cmd/..., either built once here (about a minute, cached by the go command afterwards) or,
// when OCIMAGE_TEST_BINARIES is set (os/arch=dir,... as --binaries; `make test-image` passes
// `make image`'s builds), taken from there with OCIMAGE_TEST_VERSION the version they carry.
var (
	binariesOnce sync.Once
	binariesErr  error
	testBinaries []PlatformBinaries
	testVersion  string
	tmpRoot      string
)

const (
	builtVersion  = "v9.8.7-ocimage-test.1"
	testRevision  = "0123456789abcdef0123456789abcdef01234567"
	testEpoch     = 1767225600 // 2026-01-01T00:00:00Z
	testEpochText = "2026-01-01T00:00:00Z"
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "ocimage-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	tmpRoot = dir
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// binaries returns the platforms' commands, building them on first use.
func binaries(t *testing.T) []PlatformBinaries {
	t.Helper()
	binariesOnce.Do(func() { testBinaries, testVersion, binariesErr = loadBinaries() })
	if binariesErr != nil {
		t.Fatalf("the commands to put into images: %v", binariesErr)
	}
	return testBinaries
}

func loadBinaries() ([]PlatformBinaries, string, error) {
	if env := os.Getenv("OCIMAGE_TEST_BINARIES"); env != "" {
		bins, err := parseBinaries(env)
		if err != nil {
			return nil, "", fmt.Errorf("OCIMAGE_TEST_BINARIES: %w", err)
		}
		v := os.Getenv("OCIMAGE_TEST_VERSION")
		if v == "" {
			return nil, "", fmt.Errorf("OCIMAGE_TEST_BINARIES is set but OCIMAGE_TEST_VERSION, the version they carry, is not")
		}
		return bins, v, requireAMD64AndARM64(bins)
	}
	root, err := rootModule()
	if err != nil {
		return nil, "", err
	}
	// The Makefile's LDFLAGS, with a version of the tests' own.
	ldflags := strings.Join([]string{
		"-s -w",
		"-X github.com/prometheus/common/version.Version=" + builtVersion,
		"-X github.com/prometheus/common/version.Revision=" + testRevision,
		"-X github.com/prometheus/common/version.Branch=main",
	}, " ")
	var bins []PlatformBinaries
	for _, arch := range []string{"amd64", "arm64"} {
		out := filepath.Join(tmpRoot, "bin", "linux_"+arch)
		start := time.Now()
		// `go test` puts its own go command first in PATH.
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags", ldflags, "-o", out+"/", "./cmd/...")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
		if b, err := cmd.CombinedOutput(); err != nil {
			return nil, "", fmt.Errorf("GOARCH=%s %s in %s: %w\n%s", arch, strings.Join(cmd.Args, " "), root, err, b)
		}
		fmt.Fprintf(os.Stderr, "ocimage test: built ./cmd/... for linux/%s in %v\n", arch, time.Since(start).Round(time.Millisecond))
		bins = append(bins, PlatformBinaries{Platform: Platform{OS: "linux", Arch: arch}, Dir: out})
	}
	return bins, builtVersion, nil
}

func requireAMD64AndARM64(bins []PlatformBinaries) error {
	have := map[string]bool{}
	for _, b := range bins {
		have[b.Platform.String()] = true
	}
	if !have["linux/amd64"] || !have["linux/arm64"] {
		return fmt.Errorf("OCIMAGE_TEST_BINARIES must hold linux/amd64 and linux/arm64")
	}
	return nil
}

// rootModule is the product's module directory, two levels up.
func rootModule() (string, error) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return "", err
	}
	if !bytes.HasPrefix(b, []byte("module "+MainModule+"\n")) && !bytes.Contains(b, []byte("\nmodule "+MainModule+"\n")) {
		return "", fmt.Errorf("%s/go.mod is not module %s", root, MainModule)
	}
	return root, nil
}

// testCABundle is a stand-in for the CA bundle, so that the tests do not depend on the machine's.
func testCABundle(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ca-certificates.crt")
	pem := "-----BEGIN CERTIFICATE-----\nTUlJQi4uLnRlc3Q=\n-----END CERTIFICATE-----\n"
	if err := os.WriteFile(path, []byte(pem), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// args are the command-line flags of a build of the test binaries into out.
func args(t *testing.T, out, version, ca string) []string {
	t.Helper()
	var specs []string
	for _, b := range binaries(t) {
		specs = append(specs, b.Platform.String()+"="+b.Dir)
	}
	return []string{
		"--binaries", strings.Join(specs, ","),
		"--version", version,
		"--revision", testRevision,
		"--source-date-epoch", fmt.Sprint(testEpoch),
		"--ca-bundle", ca,
		"--out", out,
	}
}

// runOK runs the command and returns the digest it printed.
func runOK(t *testing.T, args []string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	start := time.Now()
	if code := Run(args, func(string) string { return "" }, &stdout, &stderr); code != 0 {
		t.Fatalf("ocimage %s: exit %d\n%s", strings.Join(args, " "), code, stderr.String())
	}
	t.Logf("ocimage in %v:\n%s", time.Since(start).Round(time.Millisecond), stderr.String())
	return strings.TrimSpace(stdout.String())
}

var (
	sharedOnce   sync.Once
	sharedDir    string
	sharedDigest string
	sharedCA     []byte
	sharedCAPath string
)

// shared is one layout of the test binaries that the tests which only read it share.
func shared(t *testing.T) (dir, digest string) {
	t.Helper()
	binaries(t)
	sharedOnce.Do(func() {
		dir := filepath.Join(tmpRoot, "shared", "image")
		ca := filepath.Join(tmpRoot, "shared-ca.crt")
		sharedCAPath = ca
		sharedCA = []byte("-----BEGIN CERTIFICATE-----\nc2hhcmVk\n-----END CERTIFICATE-----\n")
		if err := os.WriteFile(ca, sharedCA, 0o644); err != nil {
			t.Fatal(err)
		}
		sharedDigest = runOK(t, args(t, dir, testVersion, ca))
		sharedDir = dir
	})
	if sharedDir == "" {
		t.Fatal("the shared layout failed to build (see the first test that built it)")
	}
	return sharedDir, sharedDigest
}
