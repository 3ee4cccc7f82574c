// Package krew packages kubectl-emptydir for a release: one reproducible tar.gz per platform
// (the binary and the LICENSE), a SHA256SUMS file, and the krew plugin manifest that names each
// archive by URL and sha256 (docs/kubectl-plugin.md). Validate checks a manifest as krew and
// its index do, against the archives it names.
package krew

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// PluginName is the plugin's name in krew: kubectl emptydir.
const PluginName = "emptydir"

// Binary is the plugin's executable on a platform.
func Binary(goos string) string {
	if goos == "windows" {
		return "kubectl-emptydir.exe"
	}
	return "kubectl-emptydir"
}

// ArchiveName is the release asset of one platform.
func ArchiveName(version, goos, goarch string) string {
	return fmt.Sprintf("kubectl-emptydir_%s_%s_%s.tar.gz", version, goos, goarch)
}

// WriteArchive writes a tar.gz of files (name in the archive → path on disk) to w, every
// timestamp mtime and every owner root, in the order given, so that the same inputs give the
// same bytes, and so the same sha256, on every machine.
func WriteArchive(w io.Writer, files [][2]string, mtime time.Time) error {
	gz, err := gzip.NewWriterLevel(w, gzip.BestCompression)
	if err != nil {
		return err
	}
	gz.ModTime = mtime
	tw := tar.NewWriter(gz)
	for _, f := range files {
		data, err := os.ReadFile(f[1])
		if err != nil {
			return err
		}
		mode := int64(0o644)
		if st, err := os.Stat(f[1]); err == nil && st.Mode()&0o111 != 0 {
			mode = 0o755
		}
		if err := tw.WriteHeader(&tar.Header{Name: f[0], Mode: mode, Size: int64(len(data)), ModTime: mtime,
			Typeflag: tar.TypeReg, Format: tar.FormatPAX, Uname: "root", Gname: "root"}); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

// Manifest is a krew plugin manifest (krew.googlecontainertools.github.com/v1alpha2 Plugin).
type Manifest struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Metadata   Metadata `json:"metadata"`
	Spec       Spec     `json:"spec"`
}

// Metadata is the manifest's metadata.
type Metadata struct {
	Name string `json:"name"`
}

// Spec is the manifest's spec.
type Spec struct {
	Version          string     `json:"version"`
	Homepage         string     `json:"homepage,omitempty"`
	ShortDescription string     `json:"shortDescription"`
	Description      string     `json:"description,omitempty"`
	Caveats          string     `json:"caveats,omitempty"`
	Platforms        []Platform `json:"platforms"`
}

// Platform is one platform's archive.
type Platform struct {
	Selector Selector   `json:"selector"`
	URI      string     `json:"uri"`
	Sha256   string     `json:"sha256"`
	Files    []FileSpec `json:"files,omitempty"`
	Bin      string     `json:"bin"`
}

// Selector chooses a platform by os and arch.
type Selector struct {
	MatchLabels map[string]string `json:"matchLabels"`
}

// FileSpec copies files from the archive into the plugin's directory.
type FileSpec struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// Homepage is the plugin's page.
const Homepage = "https://github.com/emptydir-guard/emptydir-guard/blob/main/docs/kubectl-plugin.md"

// NewManifest is the manifest of version; platforms are "os/arch", urlBase the directory of the
// release's assets, sums the sha256 of each platform's archive.
func NewManifest(version, urlBase string, platforms []string, sums map[string]string) Manifest {
	m := Manifest{APIVersion: "krew.googlecontainertools.github.com/v1alpha2", Kind: "Plugin", Metadata: Metadata{Name: PluginName},
		Spec: Spec{Version: version, Homepage: Homepage,
			ShortDescription: "Show emptyDir and ephemeral storage vs limits",
			Description: "Shows what fills emptyDir volumes and ephemeral storage against the sizeLimit and\n" +
				"ephemeral-storage limits the kubelet enforces, live from emptyDir guard's exporters\n" +
				"or from Prometheus: top lists pod volumes, pods and containers nearest to their\n" +
				"limits; explain POD says what counts toward each limit and what happens at it.\n",
			Caveats: "Needs emptyDir guard installed in the cluster. Reading the exporters live needs\n" +
				"list pods and get pods/proxy in its namespace (the chart's kubectlPlugin.rbac);\n" +
				"with --prometheus-url, only access to Prometheus. See " + Homepage + "\n"}}
	for _, p := range platforms {
		goos, goarch, _ := strings.Cut(p, "/")
		bin := Binary(goos)
		m.Spec.Platforms = append(m.Spec.Platforms, Platform{
			Selector: Selector{MatchLabels: map[string]string{"os": goos, "arch": goarch}},
			URI:      strings.TrimSuffix(urlBase, "/") + "/" + ArchiveName(version, goos, goarch),
			Sha256:   sums[p],
			Files:    []FileSpec{{From: bin, To: "."}, {From: "LICENSE", To: "."}},
			Bin:      bin,
		})
	}
	return m
}

// Marshal is the manifest as YAML.
func (m Manifest) Marshal() ([]byte, error) { return yaml.Marshal(m) }

var (
	semver = regexp.MustCompile(`^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)
	name   = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)
	sha    = regexp.MustCompile(`^[a-f0-9]{64}$`)
)

// Validate checks the manifest at path as krew's own validation does (name, semver version,
// short description, platforms with a selector, an https uri, a sha256 and a bin each, no
// two for one platform), plus what the krew index asks (the file named after the plugin, a
// homepage, a short description of at most 50 characters), and, for each platform, that the
// archive of its uri's file name in archives has that sha256 and holds the files and the bin
// the platform names.
func Validate(path, archives string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var m Manifest
	if err := yaml.UnmarshalStrict(data, &m); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if m.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || m.Kind != "Plugin" {
		bad("apiVersion/kind %s/%s, want krew.googlecontainertools.github.com/v1alpha2/Plugin", m.APIVersion, m.Kind)
	}
	if !name.MatchString(m.Metadata.Name) || strings.HasPrefix(m.Metadata.Name, "kubectl-") {
		bad("metadata.name %q is no plugin name", m.Metadata.Name)
	}
	if base := strings.TrimSuffix(filepath.Base(path), ".yaml"); base != m.Metadata.Name {
		bad("file %s: the index names a manifest after its plugin, %s.yaml", filepath.Base(path), m.Metadata.Name)
	}
	if !semver.MatchString(m.Spec.Version) {
		bad("spec.version %q is no semver with a leading v", m.Spec.Version)
	}
	if m.Spec.ShortDescription == "" || len(m.Spec.ShortDescription) > 50 {
		bad("spec.shortDescription %q: want 1 to 50 characters", m.Spec.ShortDescription)
	}
	if !strings.HasPrefix(m.Spec.Homepage, "https://") {
		bad("spec.homepage %q: want an https URL", m.Spec.Homepage)
	}
	if len(m.Spec.Platforms) == 0 {
		bad("spec.platforms is empty")
	}
	seen := map[string]bool{}
	for i, p := range m.Spec.Platforms {
		osArch := p.Selector.MatchLabels["os"] + "/" + p.Selector.MatchLabels["arch"]
		if p.Selector.MatchLabels["os"] == "" || p.Selector.MatchLabels["arch"] == "" || seen[osArch] {
			bad("platform %d: selector %v: want a distinct os and arch", i, p.Selector.MatchLabels)
		}
		seen[osArch] = true
		if !strings.HasPrefix(p.URI, "https://") || p.Bin == "" || !sha.MatchString(p.Sha256) {
			bad("platform %s: uri %q, bin %q, sha256 %q: want an https uri, a bin and a lower-case sha256", osArch, p.URI, p.Bin, p.Sha256)
			continue
		}
		if err := checkArchive(filepath.Join(archives, filepath.Base(p.URI)), p); err != nil {
			bad("platform %s: %w", osArch, err)
		}
	}
	return errors.Join(errs...)
}

func checkArchive(path string, p Platform) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != p.Sha256 {
		return fmt.Errorf("%s has sha256 %s, the manifest says %s", filepath.Base(path), got, p.Sha256)
	}
	gz, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return err
	}
	tr := tar.NewReader(gz)
	var names []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		names = append(names, h.Name)
		if h.Name == p.Bin && h.Mode&0o111 == 0 {
			return fmt.Errorf("%s: %s is not executable", filepath.Base(path), h.Name)
		}
	}
	for _, f := range p.Files {
		if !slices.Contains(names, f.From) {
			return fmt.Errorf("%s holds %v, not %s", filepath.Base(path), names, f.From)
		}
	}
	if !slices.Contains(names, p.Bin) {
		return fmt.Errorf("%s holds %v, not the bin %s", filepath.Base(path), names, p.Bin)
	}
	return nil
}

// SumFile is the sha256 of the file at path, in hex.
func SumFile(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}
