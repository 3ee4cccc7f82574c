package ocimage

import (
	"archive/tar"
	"bytes"
	"debug/buildinfo"
	"debug/elf"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/google/go-containerregistry/pkg/v1/validate"
)

// readIndexJSON reads the layout's index.json.
func readIndexJSON(t *testing.T, dir string) *v1.IndexManifest {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := v1.ParseIndexManifest(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func readBlob(t *testing.T, dir string, h v1.Hash) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "blobs", h.Algorithm, h.Hex))
	if err != nil {
		t.Fatal(err)
	}
	if got := sha256Of(b); got != h {
		t.Fatalf("blob %s has digest %s", h, got)
	}
	return b
}

// imageIndex reads the layout's image index, the one tagged entry of index.json, through
// go-containerregistry.
func imageIndex(t *testing.T, dir string) v1.ImageIndex {
	t.Helper()
	top, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := readIndexJSON(t, dir)
	idx, err := top.ImageIndex(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

// files lists every file of dir with its contents.
func files(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		rel, _ := filepath.Rel(dir, path)
		out[rel] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestReproducible(t *testing.T) {
	dirA, digestA := shared(t)
	dirB := filepath.Join(t.TempDir(), "image")
	digestB := runOK(t, args(t, dirB, testVersion, sharedCAPath))
	if digestA != digestB || !strings.HasPrefix(digestA, "sha256:") {
		t.Fatalf("two builds from the same inputs: index digests %q and %q", digestA, digestB)
	}
	a, b := files(t, dirA), files(t, dirB)
	if !slices.Equal(slices.Sorted(maps.Keys(a)), slices.Sorted(maps.Keys(b))) {
		t.Fatalf("two builds from the same inputs wrote different files:\n%v\n%v", slices.Sorted(maps.Keys(a)), slices.Sorted(maps.Keys(b)))
	}
	for name, content := range a {
		if !bytes.Equal(content, b[name]) {
			t.Errorf("%s differs between two builds from the same inputs", name)
		}
	}
	t.Logf("index digest %s, %d files, byte-identical", digestA, len(a))
}

// TestVersionChangesDigest: another version gives another digest; building the first version
// again into that layout replaces it (nothing of the old one survives) and gives the first
// digest back.
func TestVersionChangesDigest(t *testing.T) {
	_, digest := shared(t)
	out := filepath.Join(t.TempDir(), "image")
	other := runOK(t, args(t, out, testVersion+".other", sharedCAPath))
	if other == digest {
		t.Fatalf("another version gave the same index digest %s", digest)
	}
	stale := filepath.Join(out, "blobs", "sha256", "stale")
	if err := os.WriteFile(stale, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := runOK(t, args(t, out, testVersion, sharedCAPath)); got != digest {
		t.Errorf("rebuilding the first version into the other's layout: %s, want %s", got, digest)
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a file of the replaced layout survived (%v)", err)
	}
}

func TestIndex(t *testing.T) {
	dir, digest := shared(t)
	top := readIndexJSON(t, dir)
	if top.MediaType != types.OCIImageIndex || top.SchemaVersion != 2 {
		t.Errorf("index.json: mediaType %q, schemaVersion %d", top.MediaType, top.SchemaVersion)
	}
	if len(top.Manifests) != 1+len(binaries(t)) {
		t.Fatalf("index.json lists %d manifests, want the image index and one SBOM per platform", len(top.Manifests))
	}
	tagged := top.Manifests[0]
	if tagged.Digest.String() != digest || tagged.MediaType != types.OCIImageIndex || tagged.Annotations[AnnotationRefName] != testVersion {
		t.Errorf("index.json's first entry %+v: want the image index %s tagged %s", tagged, digest, testVersion)
	}

	idx := imageIndex(t, dir)
	if err := validate.Index(idx); err != nil {
		t.Errorf("validate.Index: %v", err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.MediaType != types.OCIImageIndex {
		t.Errorf("image index mediaType %q", m.MediaType)
	}
	var platforms, want []string
	for _, d := range m.Manifests {
		if d.MediaType != types.OCIManifestSchema1 || d.Platform == nil {
			t.Errorf("manifest %s: mediaType %q, platform %v", d.Digest, d.MediaType, d.Platform)
			continue
		}
		platforms = append(platforms, d.Platform.String())
	}
	for _, b := range binaries(t) {
		want = append(want, b.Platform.String())
	}
	if !slices.Equal(platforms, want) || !slices.Contains(platforms, "linux/amd64") || !slices.Contains(platforms, "linux/arm64") {
		t.Errorf("image index platforms %v, want %v (linux/amd64 and linux/arm64)", platforms, want)
	}
	wantAnn := map[string]string{AnnotationVersion: testVersion, AnnotationRevision: testRevision, AnnotationCreated: testEpochText}
	if !maps.Equal(m.Annotations, wantAnn) {
		t.Errorf("image index annotations %v, want %v", m.Annotations, wantAnn)
	}
}

// platformImages returns the image of each platform in the shared layout.
func platformImages(t *testing.T) map[string]v1.Image {
	t.Helper()
	dir, _ := shared(t)
	idx := imageIndex(t, dir)
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]v1.Image{}
	for _, d := range m.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		out[d.Platform.String()] = img
	}
	return out
}

func TestImageConfig(t *testing.T) {
	for platform, img := range platformImages(t) {
		t.Run(platform, func(t *testing.T) {
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if got := cf.OS + "/" + cf.Architecture; got != platform {
				t.Errorf("config os/architecture %s, want %s", got, platform)
			}
			c := cf.Config
			if c.User != "65532:65532" {
				t.Errorf("User %q, want 65532:65532", c.User)
			}
			if !slices.Equal(c.Entrypoint, []string{"/usr/local/bin/emptydir-exporter"}) || len(c.Cmd) != 0 {
				t.Errorf("Entrypoint %q, Cmd %q", c.Entrypoint, c.Cmd)
			}
			if got := slices.Sorted(maps.Keys(c.ExposedPorts)); !slices.Equal(got, []string{"9731/tcp", "9732/tcp"}) {
				t.Errorf("ExposedPorts %v", got)
			}
			if len(c.Env) != 1 || !strings.HasPrefix(c.Env[0], "PATH=") {
				t.Errorf("Env %q, want PATH only", c.Env)
			}
			if !cf.Created.Equal(cf.Created.UTC()) || cf.Created.Unix() != testEpoch {
				t.Errorf("created %v, want the source date epoch %s", cf.Created, testEpochText)
			}
			wantLabels := map[string]string{
				"org.opencontainers.image.title":         "emptydir-guard",
				"org.opencontainers.image.description":   imageDescription,
				"org.opencontainers.image.source":        "https://github.com/emptydir-guard/emptydir-guard",
				"org.opencontainers.image.url":           "https://github.com/emptydir-guard/emptydir-guard",
				"org.opencontainers.image.documentation": "https://github.com/emptydir-guard/emptydir-guard/blob/main/docs/deploy.md",
				"org.opencontainers.image.version":       testVersion,
				"org.opencontainers.image.revision":      testRevision,
				"org.opencontainers.image.created":       testEpochText,
				"org.opencontainers.image.licenses":      "Apache-2.0",
			}
			if !maps.Equal(c.Labels, wantLabels) {
				t.Errorf("labels %v\nwant %v", c.Labels, wantLabels)
			}
			for _, h := range cf.History {
				if h.Created.Unix() != testEpoch {
					t.Errorf("history entry %q created %v", h.CreatedBy, h.Created)
				}
			}
		})
	}
}

// tarEntry is what a test checks of a layer's entry.
type tarEntry struct {
	Name     string
	Type     byte
	Mode     int64
	UID, GID int
}

func layerEntries(t *testing.T, l v1.Layer) ([]tarEntry, map[string][]byte) {
	t.Helper()
	mt, err := l.MediaType()
	if err != nil || mt != types.OCILayer {
		t.Errorf("layer mediaType %q (%v), want %q", mt, err, types.OCILayer)
	}
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	var entries []tarEntry
	contents := map[string][]byte{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.ModTime.Unix() != testEpoch || h.Uname != "" || h.Gname != "" || !h.AccessTime.IsZero() || !h.ChangeTime.IsZero() || len(h.PAXRecords) != 0 {
			t.Errorf("%s: mtime %v, uname %q, gname %q, atime %v, ctime %v, PAX %v", h.Name, h.ModTime, h.Uname, h.Gname, h.AccessTime, h.ChangeTime, h.PAXRecords)
		}
		entries = append(entries, tarEntry{h.Name, h.Typeflag, h.Mode, h.Uid, h.Gid})
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		contents[h.Name] = b
	}
	return entries, contents
}

func TestLayers(t *testing.T) {
	const d, f = tar.TypeDir, tar.TypeReg
	wantBase := []tarEntry{
		{"etc/", d, 0o755, 0, 0},
		{"etc/group", f, 0o644, 0, 0},
		{"etc/passwd", f, 0o644, 0, 0},
		{"etc/ssl/", d, 0o755, 0, 0},
		{"etc/ssl/certs/", d, 0o755, 0, 0},
		{"etc/ssl/certs/ca-certificates.crt", f, 0o644, 0, 0},
		{"home/", d, 0o755, 0, 0},
		{"home/nonroot/", d, 0o700, 65532, 65532},
		{"tmp/", d, 0o1777, 0, 0},
	}
	wantBinaries := []tarEntry{
		{"usr/", d, 0o755, 0, 0},
		{"usr/local/", d, 0o755, 0, 0},
		{"usr/local/bin/", d, 0o755, 0, 0},
		{"usr/local/bin/emptydir-exporter", f, 0o755, 0, 0},
		{"usr/local/bin/emptydir-remediator", f, 0o755, 0, 0},
	}
	for platform, img := range platformImages(t) {
		t.Run(platform, func(t *testing.T) {
			layers, err := img.Layers()
			if err != nil {
				t.Fatal(err)
			}
			if len(layers) != 2 {
				t.Fatalf("%d layers, want the base and the binaries", len(layers))
			}
			base, contents := layerEntries(t, layers[0])
			if !slices.Equal(base, wantBase) {
				t.Errorf("base layer:\n%v\nwant\n%v", base, wantBase)
			}
			bins, _ := layerEntries(t, layers[1])
			if !slices.Equal(bins, wantBinaries) {
				t.Errorf("binaries layer:\n%v\nwant\n%v", bins, wantBinaries)
			}
			for _, e := range append(base, bins...) {
				if strings.Contains(e.Name, "bin/sh") || strings.HasSuffix(e.Name, "busybox") {
					t.Errorf("the image has a shell: %s", e.Name)
				}
			}
			if !bytes.Equal(contents["etc/ssl/certs/ca-certificates.crt"], sharedCA) {
				t.Errorf("the CA bundle is not the one given")
			}
			if !strings.Contains(string(contents["etc/passwd"]), "nonroot:x:65532:65532:") || !strings.Contains(string(contents["etc/group"]), "nonroot:x:65532:") {
				t.Errorf("/etc/passwd %q, /etc/group %q: want nonroot 65532", contents["etc/passwd"], contents["etc/group"])
			}
		})
	}
}

func TestBinaries(t *testing.T) {
	dirs := map[string]string{}
	for _, b := range binaries(t) {
		dirs[b.Platform.String()] = b.Dir
	}
	machines := map[string]elf.Machine{"linux/amd64": elf.EM_X86_64, "linux/arm64": elf.EM_AARCH64}
	for platform, img := range platformImages(t) {
		t.Run(platform, func(t *testing.T) {
			layers, err := img.Layers()
			if err != nil {
				t.Fatal(err)
			}
			_, contents := layerEntries(t, layers[1])
			for _, c := range Commands {
				b := contents["usr/local/bin/"+c]
				src, err := os.ReadFile(filepath.Join(dirs[platform], c))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(b, src) {
					t.Errorf("%s in the image differs from the one given", c)
				}
				f, err := elf.NewFile(bytes.NewReader(b))
				if err != nil {
					t.Fatalf("%s: %v", c, err)
				}
				if want, ok := machines[platform]; ok && f.Machine != want {
					t.Errorf("%s: ELF machine %v, want %v", c, f.Machine, want)
				}
				bi, err := buildinfo.Read(bytes.NewReader(b))
				if err != nil {
					t.Fatalf("%s: %v", c, err)
				}
				settings := map[string]string{}
				for _, s := range bi.Settings {
					settings[s.Key] = s.Value
				}
				goos, goarch, _ := strings.Cut(platform, "/")
				if settings["GOOS"] != goos || settings["GOARCH"] != goarch || settings["CGO_ENABLED"] != "0" || settings["-trimpath"] != "true" {
					t.Errorf("%s: build settings %v, want GOOS=%s GOARCH=%s CGO_ENABLED=0 -trimpath=true", c, settings, goos, goarch)
				}
				if bi.Main.Path != MainModule || bi.Path != MainModule+"/cmd/"+c {
					t.Errorf("%s: build info main module %s, package %s", c, bi.Main.Path, bi.Path)
				}
				// With -trimpath the go command leaves -ldflags out of the build info
				// (go.dev/issue/52372); the version it set is in the binary's data.
				if ld, ok := settings["-ldflags"]; ok && !strings.Contains(ld, "version.Version="+testVersion) {
					t.Errorf("%s: -ldflags %q lacks version.Version=%s", c, ld, testVersion)
				}
				if !bytes.Contains(b, []byte(testVersion)) {
					t.Errorf("%s does not carry the version %s set with -ldflags", c, testVersion)
				}
			}
		})
	}
}

func TestSBOMReferrers(t *testing.T) {
	dir, _ := shared(t)
	root, err := rootModule()
	if err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	match := regexp.MustCompile(`(?m)^\s*github\.com/prometheus/client_golang (v\S+)`).FindSubmatch(gomod)
	if match == nil {
		t.Fatal("go.mod does not require github.com/prometheus/client_golang")
	}
	clientGolang := string(match[1])

	top := readIndexJSON(t, dir)
	referrers := map[v1.Hash]v1.Descriptor{} // by subject
	for _, d := range top.Manifests[1:] {
		if d.MediaType != types.OCIManifestSchema1 || d.ArtifactType != SBOMArtifactType {
			t.Errorf("index.json entry %s: mediaType %q, artifactType %q", d.Digest, d.MediaType, d.ArtifactType)
		}
		var m v1.Manifest
		if err := json.Unmarshal(readBlob(t, dir, d.Digest), &m); err != nil {
			t.Fatal(err)
		}
		if m.Subject == nil {
			t.Fatalf("referrer %s has no subject", d.Digest)
		}
		if m.ArtifactType != SBOMArtifactType || m.Config.MediaType != "application/vnd.oci.empty.v1+json" || m.Config.Size != 2 {
			t.Errorf("referrer %s: artifactType %q, config %+v", d.Digest, m.ArtifactType, m.Config)
		}
		if string(readBlob(t, dir, m.Config.Digest)) != "{}" {
			t.Errorf("referrer %s: the empty config blob is not {}", d.Digest)
		}
		referrers[m.Subject.Digest] = d
	}

	idx := imageIndex(t, dir)
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, img := range im.Manifests {
		t.Run(img.Platform.String(), func(t *testing.T) {
			ref, ok := referrers[img.Digest]
			if !ok {
				t.Fatalf("no SBOM referrer has the image manifest %s as its subject", img.Digest)
			}
			var m v1.Manifest
			if err := json.Unmarshal(readBlob(t, dir, ref.Digest), &m); err != nil {
				t.Fatal(err)
			}
			if m.Subject.MediaType != img.MediaType || m.Subject.Size != img.Size {
				t.Errorf("subject %+v, want the manifest %+v", m.Subject, img)
			}
			if len(m.Layers) != 1 || m.Layers[0].MediaType != SBOMArtifactType {
				t.Fatalf("referrer layers %+v, want one %s", m.Layers, SBOMArtifactType)
			}
			var doc spdxDoc
			raw := readBlob(t, dir, m.Layers[0].Digest)
			if err := json.Unmarshal(raw, &doc); err != nil {
				t.Fatal(err)
			}
			if doc.SPDXVersion != "SPDX-2.3" || doc.DataLicense != "CC0-1.0" || doc.SPDXID != "SPDXRef-DOCUMENT" {
				t.Errorf("document header %q %q %q", doc.SPDXVersion, doc.DataLicense, doc.SPDXID)
			}
			if !strings.Contains(doc.DocumentNamespace, img.Digest.Hex) || doc.CreationInfo.Created != testEpochText {
				t.Errorf("namespace %q (want the manifest digest in it), created %q", doc.DocumentNamespace, doc.CreationInfo.Created)
			}
			pkgs := map[string]spdxPackage{}
			for _, p := range doc.Packages {
				pkgs[p.Name] = p
			}
			if p := pkgs[MainModule]; p.VersionInfo != testVersion {
				t.Errorf("main module %s at %q, want %s", MainModule, p.VersionInfo, testVersion)
			}
			p, ok := pkgs["github.com/prometheus/client_golang"]
			if !ok || p.VersionInfo != clientGolang {
				t.Errorf("github.com/prometheus/client_golang at %q (listed: %v), want %s as in go.mod", p.VersionInfo, ok, clientGolang)
			}
			if len(p.Checksums) != 1 || p.Checksums[0].Algorithm != "SHA256" || len(p.Checksums[0].ChecksumValue) != 64 || !strings.Contains(p.Comment, "h1:") {
				t.Errorf("client_golang checksums %+v, comment %q: want its go.sum hash", p.Checksums, p.Comment)
			}
			if std := pkgs["stdlib"]; !strings.HasPrefix(std.VersionInfo, "go1.") {
				t.Errorf("stdlib version %q", std.VersionInfo)
			}
			var names []string
			for _, f := range doc.Files {
				names = append(names, f.FileName)
			}
			if want := []string{"/etc/ssl/certs/ca-certificates.crt", "/usr/local/bin/emptydir-exporter", "/usr/local/bin/emptydir-remediator"}; !slices.Equal(names, want) {
				t.Errorf("SBOM files %v, want %v", names, want)
			}
			ids := map[string]bool{}
			for _, p := range doc.Packages {
				if ids[p.SPDXID] || !regexp.MustCompile(`^SPDXRef-[A-Za-z0-9.-]+$`).MatchString(p.SPDXID) {
					t.Errorf("package %s: SPDXID %q duplicated or malformed", p.Name, p.SPDXID)
				}
				ids[p.SPDXID] = true
			}
		})
	}
}
