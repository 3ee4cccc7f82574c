package ocimage

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

var releasePlatforms = []Platform{{"linux", "amd64"}, {"linux", "arm64"}}

// testRegistry serves an in-memory registry (go-containerregistry's pkg/registry) on loopback,
// with the OCI 1.1 Referrers API or without it (clients then use the referrers tag,
// sha256-<digest>). It returns the server and its host:port.
func testRegistry(t *testing.T, referrersAPI bool) (*httptest.Server, string) {
	t.Helper()
	quiet := registry.Logger(log.New(io.Discard, "", 0))
	var h http.Handler
	if referrersAPI {
		h = referrersArtifactType(registry.New(quiet, registry.WithReferrersSupport(true)))
	} else {
		inner := registry.New(quiet)
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if _, ok := referrersPath(r); ok {
				http.Error(w, `{"errors":[{"code":"UNSUPPORTED","message":"no Referrers API"}]}`, http.StatusNotFound)
				return
			}
			inner.ServeHTTP(w, r)
		})
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, strings.TrimPrefix(srv.URL, "http://")
}

// referrersPath returns the repository of a GET /v2/<name>/referrers/<digest>.
func referrersPath(r *http.Request) (string, bool) {
	repo, _, ok := strings.Cut(strings.TrimPrefix(r.URL.Path, "/v2/"), "/referrers/")
	return repo, ok && r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v2/")
}

// referrersArtifactType makes pkg/registry's Referrers API answer as the distribution spec
// says: it gives each referrer its config's media type as the artifactType, where the spec (and
// real registries) give the manifest's artifactType when it has one, as the SBOMs do.
func referrersArtifactType(inner http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		repo, ok := referrersPath(r)
		if !ok {
			inner.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		inner.ServeHTTP(rec, r)
		if rec.Code != http.StatusOK {
			w.WriteHeader(rec.Code)
			_, _ = w.Write(rec.Body.Bytes())
			return
		}
		im, err := v1.ParseIndexManifest(rec.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		for i, d := range im.Manifests {
			mrec := httptest.NewRecorder()
			inner.ServeHTTP(mrec, httptest.NewRequestWithContext(r.Context(), http.MethodGet, "/v2/"+repo+"/manifests/"+d.Digest.String(), nil))
			var m struct {
				ArtifactType string `json:"artifactType"`
			}
			if err := json.Unmarshal(mrec.Body.Bytes(), &m); err == nil && m.ArtifactType != "" {
				im.Manifests[i].ArtifactType = m.ArtifactType
			}
		}
		w.Header().Set("Content-Type", string(types.OCIImageIndex))
		_ = json.NewEncoder(w).Encode(im)
	})
}

func testRepo(t *testing.T, s string, opts ...name.Option) name.Repository {
	t.Helper()
	repo, err := name.NewRepository(s, append(opts, name.StrictValidation)...)
	if err != nil {
		t.Fatal(err)
	}
	return repo
}

// pushShared pushes the shared layout to host/emptydir-guard.
func pushShared(t *testing.T, host string) (name.Repository, *Pushed) {
	t.Helper()
	dir, _ := shared(t)
	repo := testRepo(t, host+"/emptydir-guard")
	p, err := Push(t.Context(), dir, repo)
	if err != nil {
		t.Fatalf("Push: %v", err)
	}
	return repo, p
}

func TestPushCheck(t *testing.T) {
	dir, digest := shared(t)
	top := readIndexJSON(t, dir)
	var wantSBOMs []string
	for _, d := range top.Manifests[1:] {
		wantSBOMs = append(wantSBOMs, d.Digest.String())
	}
	idx, err := imageIndex(t, dir).IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, referrersAPI := range []bool{true, false} {
		t.Run(map[bool]string{true: "referrers API", false: "referrers tag"}[referrersAPI], func(t *testing.T) {
			_, host := testRegistry(t, referrersAPI)
			repo, p := pushShared(t, host)
			if p.Index.DigestStr() != digest || p.Index.Context() != repo {
				t.Errorf("pushed the index %s, want %s@%s", p.Index, repo, digest)
			}
			if p.Tag.TagStr() != testVersion || p.Tag.Context() != repo {
				t.Errorf("pushed the tag %s, want %s:%s", p.Tag, repo, testVersion)
			}
			var sboms []string
			for _, s := range p.SBOMs {
				sboms = append(sboms, s.DigestStr())
				if s.Context() != repo {
					t.Errorf("pushed the SBOM %s to another repository", s)
				}
			}
			if !slices.Equal(sboms, wantSBOMs) {
				t.Errorf("pushed the SBOMs %v, want the layout's %v", sboms, wantSBOMs)
			}

			for _, ref := range []name.Reference{p.Tag, p.Index} {
				got, err := Check(t.Context(), ref, releasePlatforms)
				if err != nil {
					t.Errorf("Check(%s): %v", ref, err)
				}
				if got.DigestStr() != digest || got.Context() != repo {
					t.Errorf("Check(%s) = %s, want %s@%s", ref, got, repo, digest)
				}
			}

			// What a user finds: the tag, and each platform image's SBOM among its referrers.
			tags, err := remote.List(repo, remote.WithContext(t.Context()))
			if err != nil {
				t.Fatal(err)
			}
			wantTags := []string{testVersion}
			if !referrersAPI {
				for _, d := range idx.Manifests {
					wantTags = append(wantTags, "sha256-"+d.Digest.Hex)
				}
			}
			slices.Sort(tags)
			slices.Sort(wantTags)
			if !slices.Equal(tags, wantTags) {
				t.Errorf("the registry lists the tags %v, want %v", tags, wantTags)
			}
			for _, img := range idx.Manifests {
				refs, err := remote.Referrers(repo.Digest(img.Digest.String()), remote.WithContext(t.Context()))
				if err != nil {
					t.Fatalf("%s: referrers: %v", img.Platform, err)
				}
				rm, err := refs.IndexManifest()
				if err != nil {
					t.Fatal(err)
				}
				var found []string
				for _, r := range rm.Manifests {
					if r.ArtifactType == SBOMArtifactType && slices.Contains(wantSBOMs, r.Digest.String()) {
						found = append(found, r.Digest.String())
					}
				}
				if len(rm.Manifests) != 1 || len(found) != 1 {
					t.Errorf("%s image %s: referrers %+v, want one of the layout's SBOMs", img.Platform, img.Digest, rm.Manifests)
				}
			}

			// Pushing again (a rerun release job) changes nothing.
			again, err := Push(t.Context(), dir, repo)
			if err != nil {
				t.Fatalf("Push again: %v", err)
			}
			if again.Index != p.Index || !slices.Equal(again.SBOMs, p.SBOMs) {
				t.Errorf("Push again = %+v, want %+v", again, p)
			}
			for _, img := range idx.Manifests {
				refs, err := remote.Referrers(repo.Digest(img.Digest.String()), remote.WithContext(t.Context()))
				if err != nil {
					t.Fatal(err)
				}
				if rm, err := refs.IndexManifest(); err != nil || len(rm.Manifests) != 1 {
					t.Errorf("%s after a second push: referrers %+v (%v), want one", img.Platform, rm, err)
				}
			}
			if _, err := Check(t.Context(), p.Tag, releasePlatforms); err != nil {
				t.Errorf("Check after a second push: %v", err)
			}
		})
	}
}

func TestCheckMissingPlatform(t *testing.T) {
	_, host := testRegistry(t, false)
	repo, p := pushShared(t, host)
	_, err := Check(t.Context(), p.Tag, []Platform{{"linux", "amd64"}, {"linux", "s390x"}})
	if err == nil || !strings.Contains(err.Error(), "no image for linux/s390x (it has linux/amd64, linux/arm64)") {
		t.Errorf("Check for linux/s390x: %v, want an error naming linux/s390x", err)
	}
	if err != nil && strings.Contains(err.Error(), "linux/amd64 image") {
		t.Errorf("Check for linux/s390x found a problem with the linux/amd64 image: %v", err)
	}

	// An index of the amd64 image alone.
	var amd64 []PlatformBinaries
	for _, b := range binaries(t) {
		if b.Platform == (Platform{"linux", "amd64"}) {
			amd64 = append(amd64, b)
		}
	}
	version := testVersion + "-amd64"
	out := filepath.Join(t.TempDir(), "image")
	res, err := Build(Options{Binaries: amd64, Version: version, Revision: testRevision, SourceDateEpoch: testEpoch, CABundle: testCABundle(t), Out: out})
	if err != nil {
		t.Fatal(err)
	}
	p2, err := Push(t.Context(), out, repo)
	if err != nil {
		t.Fatal(err)
	}
	if p2.Tag.TagStr() != version || p2.Index.DigestStr() != res.Index.Digest.String() || len(p2.SBOMs) != 1 {
		t.Errorf("Push of the amd64 layout = %+v, want the tag %s, the index %s and one SBOM", p2, version, res.Index.Digest)
	}
	if _, err := Check(t.Context(), p2.Tag, []Platform{{"linux", "amd64"}}); err != nil {
		t.Errorf("Check of the amd64 index for linux/amd64: %v", err)
	}
	got, err := Check(t.Context(), p2.Tag, releasePlatforms)
	if err == nil || !strings.Contains(err.Error(), "no image for linux/arm64 (it has linux/amd64)") {
		t.Errorf("Check of the amd64 index for linux/amd64 and linux/arm64: %v, want an error naming linux/arm64", err)
	}
	if got.DigestStr() != res.Index.Digest.String() {
		t.Errorf("Check returned %s, want the index it read, %s", got, res.Index.Digest)
	}
}

// TestCheckNoSBOM: the image index pushed alone, without its SBOM referrers.
func TestCheckNoSBOM(t *testing.T) {
	for _, referrersAPI := range []bool{true, false} {
		t.Run(map[bool]string{true: "referrers API", false: "referrers tag"}[referrersAPI], func(t *testing.T) {
			dir, _ := shared(t)
			_, host := testRegistry(t, referrersAPI)
			tag := testRepo(t, host+"/emptydir-guard").Tag(testVersion)
			if err := remote.WriteIndex(tag, imageIndex(t, dir), remote.WithContext(t.Context())); err != nil {
				t.Fatal(err)
			}
			_, err := Check(t.Context(), tag, releasePlatforms)
			for _, p := range releasePlatforms {
				if err == nil || !strings.Contains(err.Error(), "the "+p.String()+" image") || !strings.Contains(err.Error(), "has no SBOM") {
					t.Errorf("Check of an index without SBOMs: %v, want an error naming the %s image's SBOM", err, p)
				}
			}
			// The SBOMs pushed, it is a release.
			if _, err := Push(t.Context(), dir, tag.Context()); err != nil {
				t.Fatal(err)
			}
			if _, err := Check(t.Context(), tag, releasePlatforms); err != nil {
				t.Errorf("Check once the SBOMs are pushed: %v", err)
			}
		})
	}
}

// TestCheckNotAnIndex: one platform's image manifest under a tag runs on that platform only.
func TestCheckNotAnIndex(t *testing.T) {
	_, host := testRegistry(t, false)
	repo, _ := pushShared(t, host) // the image's SBOM is there too
	img := platformImages(t)["linux/amd64"]
	tag := repo.Tag("amd64-only")
	if err := remote.Write(tag, img, remote.WithContext(t.Context())); err != nil {
		t.Fatal(err)
	}
	h, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	got, err := Check(t.Context(), tag, []Platform{{"linux", "amd64"}})
	if err == nil || !strings.Contains(err.Error(), string(types.OCIManifestSchema1)+", not an image index") {
		t.Errorf("Check of an image manifest: %v, want an error saying it is not an image index", err)
	}
	if got.DigestStr() != h.String() {
		t.Errorf("Check returned %s, want the manifest it read, %s", got, h)
	}
}

// TestCheckWrongPlatformImage: an index listing the amd64 image for linux/arm64 too.
func TestCheckWrongPlatformImage(t *testing.T) {
	_, host := testRegistry(t, false)
	repo, _ := pushShared(t, host) // the SBOMs of both images are there
	img := platformImages(t)["linux/amd64"]
	forged := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex),
		mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}},
		mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64"}}},
	)
	tag := repo.Tag("forged")
	if err := remote.WriteIndex(tag, forged, remote.WithContext(t.Context())); err != nil {
		t.Fatal(err)
	}
	_, err := Check(t.Context(), tag, releasePlatforms)
	if err == nil || !strings.Contains(err.Error(), "the image listed for linux/arm64 is built for linux/amd64") {
		t.Errorf("Check of an index listing the amd64 image for arm64: %v", err)
	}
	if err != nil && strings.Contains(err.Error(), "listed for linux/amd64") {
		t.Errorf("Check found a problem with the linux/amd64 entry: %v", err)
	}
}

func TestCheckMissingTag(t *testing.T) {
	_, host := testRegistry(t, false)
	repo, _ := pushShared(t, host)
	for ref, want := range map[name.Reference]string{
		repo.Tag("v0.0.0-missing"):                      "MANIFEST_UNKNOWN",
		testRepo(t, host+"/elsewhere").Tag(testVersion): "NAME_UNKNOWN",
	} {
		_, err := Check(t.Context(), ref, releasePlatforms)
		if err == nil || !strings.Contains(err.Error(), ref.String()) || !strings.Contains(err.Error(), want) {
			t.Errorf("Check(%s): %v, want an error naming it, %s", ref, err, want)
		}
	}
}

// copyLayout copies the layout at dir into a new directory, with index.json rewritten by edit.
func copyLayout(t *testing.T, dir string, edit func(*v1.IndexManifest)) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "image")
	for rel, b := range files(t, dir) {
		path := filepath.Join(out, rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m := readIndexJSON(t, out)
	edit(m)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, "index.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestPushRefuses(t *testing.T) {
	dir, _ := shared(t)
	notLayout := t.TempDir()
	if err := os.WriteFile(filepath.Join(notLayout, "README"), []byte("not an image\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	emptyIndex := t.TempDir()
	if err := os.WriteFile(filepath.Join(emptyIndex, "index.json"), []byte(`{"schemaVersion":2,"manifests":[]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	// A copy with index.json as it is pushes (to another registry): the refused copies below
	// differ from it by their edit only.
	_, other := testRegistry(t, false)
	if _, err := Push(t.Context(), copyLayout(t, dir, func(*v1.IndexManifest) {}), testRepo(t, other+"/emptydir-guard")); err != nil {
		t.Fatalf("Push of an unedited copy: %v", err)
	}
	_, host := testRegistry(t, false)
	repo := testRepo(t, host+"/emptydir-guard")
	for _, tc := range []struct {
		name, dir, want string
	}{
		{"no directory", filepath.Join(t.TempDir(), "missing"), "reading the image layout"},
		{"not a layout", notLayout, "reading the image layout " + notLayout},
		{"empty index.json", emptyIndex, "holds no tagged image index"},
		{"untagged index", copyLayout(t, dir, func(m *v1.IndexManifest) { m.Manifests[0].Annotations = nil }), "neither the tagged image index nor an SBOM"},
		{"no index", copyLayout(t, dir, func(m *v1.IndexManifest) { m.Manifests = m.Manifests[1:] }), "holds no tagged image index"},
		{"two tagged indexes", copyLayout(t, dir, func(m *v1.IndexManifest) {
			other := m.Manifests[0]
			other.Annotations = map[string]string{AnnotationRefName: "v0.0.1"}
			m.Manifests = append(m.Manifests, other)
		}), "tags two image indexes"},
		{"tag not a tag", copyLayout(t, dir, func(m *v1.IndexManifest) { m.Manifests[0].Annotations[AnnotationRefName] = "v1.0.0+build" }), "the layout's tag"},
		{"an image beside", copyLayout(t, dir, func(m *v1.IndexManifest) {
			img := m.Manifests[1]
			img.ArtifactType = ""
			m.Manifests = append(m.Manifests, img)
		}), "not written by ocimage"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Push(t.Context(), tc.dir, repo)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Push = %+v, %v, want an error with %q", p, err, tc.want)
			}
		})
	}
	repos, err := remote.Catalog(t.Context(), repo.Registry)
	if err != nil {
		t.Fatal(err)
	}
	if len(repos) != 0 {
		t.Errorf("refused pushes left the repositories %v", repos)
	}
}

// TestPlainHTTPRegistryName: --plain-http with a registry whose name says nothing of HTTP (not
// loopback, not a private address), as a test cluster's registry service. Push and Check must
// both talk HTTP to it.
func TestPlainHTTPRegistryName(t *testing.T) {
	dir, digest := shared(t)
	srv, _ := testRegistry(t, false)
	// Every connection, whatever the host, goes to the test registry.
	dial := remote.WithTransport(&http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, srv.Listener.Addr().String())
	}})
	const repoName = "registry.example:5000/emptydir-guard"
	push := func(extra ...string) (*Pushed, error) {
		o, err := ParseReleaseOptions(append([]string{"push", "--layout", dir, "--repository", repoName}, extra...), io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		return Push(t.Context(), o.Layout, o.Repo, dial)
	}
	if _, err := push(); err == nil {
		t.Fatal("Push over HTTPS to an HTTP registry succeeded: the test cannot tell the schemes apart")
	}
	p, err := push("--plain-http")
	if err != nil {
		t.Fatalf("Push --plain-http: %v", err)
	}
	if p.Index.DigestStr() != digest {
		t.Errorf("pushed %s, want %s", p.Index, digest)
	}
	o, err := ParseReleaseOptions([]string{"check", "--plain-http", "--image", repoName + ":" + testVersion, "--platforms", "linux/amd64,linux/arm64"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Check(t.Context(), o.Image, o.Platforms, dial)
	if err != nil || got.DigestStr() != digest {
		t.Errorf("Check --plain-http = %s, %v, want %s", got, err, digest)
	}
}

func TestRunRelease(t *testing.T) {
	dir, digest := shared(t)
	t.Setenv("DOCKER_CONFIG", t.TempDir()) // no credentials of the machine's
	_, host := testRegistry(t, false)
	repo := host + "/emptydir-guard"
	run := func(args ...string) (code int, stdout, stderr string) {
		var out, errOut bytes.Buffer
		code = RunRelease(t.Context(), args, &out, &errOut)
		t.Logf("ocirelease %s: exit %d\n%s", strings.Join(args, " "), code, errOut.String())
		return code, out.String(), errOut.String()
	}
	wantOut := repo + "@" + digest + "\n"

	if code, out, errOut := run("push", "--layout", dir, "--repository", repo); code != 0 || out != wantOut || !strings.Contains(errOut, "and 2 SBOMs") {
		t.Errorf("push: exit %d, stdout %q, stderr %q; want 0, %q", code, out, errOut, wantOut)
	}
	for _, image := range []string{repo + ":" + testVersion, strings.TrimSpace(wantOut)} {
		code, out, errOut := run("check", "--plain-http", "--image", image, "--platforms", "linux/amd64 linux/arm64")
		if code != 0 || out != wantOut || !strings.Contains(errOut, "is a release for linux/amd64, linux/arm64") {
			t.Errorf("check %s: exit %d, stdout %q, stderr %q; want 0, %q", image, code, out, errOut, wantOut)
		}
	}

	for _, tc := range []struct {
		name string
		args []string
		code int
		want string // in stderr
	}{
		{"check of a missing platform", []string{"check", "--image", repo + ":" + testVersion, "--platforms", "linux/amd64,linux/s390x"}, 1, "no image for linux/s390x"},
		{"check of a missing tag", []string{"check", "--image", repo + ":v0.0.0-missing", "--platforms", "linux/amd64"}, 1, "MANIFEST_UNKNOWN"},
		{"push of no layout", []string{"push", "--layout", t.TempDir(), "--repository", repo}, 1, "reading the image layout"},
		{"no command", nil, 2, "want a command"},
		{"push without a repository", []string{"push", "--layout", dir}, 2, `--repository ""`},
		{"check with a bad platform", []string{"check", "--image", repo + ":" + testVersion, "--platforms", "amd64"}, 2, `"amd64": want os/arch`},
		{"unknown flag", []string{"check", "--image", repo + ":" + testVersion, "--platforms", "linux/amd64", "--insecure"}, 2, "-insecure"},
		{"help", []string{"-h"}, 0, "ocirelease push"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := run(tc.args...)
			if code != tc.code || out != "" || !strings.Contains(errOut, tc.want) {
				t.Errorf("ocirelease %q: exit %d, stdout %q, stderr %q; want %d, nothing, %q", tc.args, code, out, errOut, tc.code, tc.want)
			}
		})
	}
}
