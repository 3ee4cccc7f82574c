package krew

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// release writes what `make plugin-release` writes, from fake binaries: an archive per
// platform and the manifest, and returns the directory and the manifest's path.
func release(t *testing.T, platforms []string) (string, string) {
	t.Helper()
	dir := t.TempDir()
	license := filepath.Join(dir, "LICENSE")
	if err := os.WriteFile(license, []byte("Apache License 2.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sums := map[string]string{}
	for _, p := range platforms {
		goos, goarch, _ := strings.Cut(p, "/")
		bin := filepath.Join(dir, goos+"_"+goarch, Binary(goos))
		if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(bin, []byte("binary of "+p), 0o755); err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := WriteArchive(&b, [][2]string{{Binary(goos), bin}, {"LICENSE", license}}, time.Unix(1700000000, 0)); err != nil {
			t.Fatal(err)
		}
		name := filepath.Join(dir, ArchiveName("v1.2.3", goos, goarch))
		if err := os.WriteFile(name, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		var err error
		if sums[p], err = SumFile(name); err != nil {
			t.Fatal(err)
		}
	}
	m, err := NewManifest("v1.2.3", "https://github.com/emptydir-guard/emptydir-guard/releases/download/v1.2.3/", platforms, sums).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "emptydir.yaml")
	if err := os.WriteFile(path, m, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, path
}

var platforms = []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64", "windows/amd64"}

func TestManifestValid(t *testing.T) {
	dir, path := release(t, platforms)
	if err := Validate(path, dir); err != nil {
		t.Fatal(err)
	}
	m, _ := os.ReadFile(path)
	for _, want := range []string{
		"apiVersion: krew.googlecontainertools.github.com/v1alpha2\n", "kind: Plugin\n", "  name: emptydir\n", "  version: v1.2.3\n",
		"uri: https://github.com/emptydir-guard/emptydir-guard/releases/download/v1.2.3/kubectl-emptydir_v1.2.3_windows_amd64.tar.gz\n",
		"  - bin: kubectl-emptydir.exe\n",
	} {
		if !bytes.Contains(m, []byte(want)) {
			t.Errorf("manifest lacks %q:\n%s", want, m)
		}
	}
}

// TestArchiveReproducible: the same inputs give the same bytes, so the manifest's sha256 is the
// archive's wherever it is rebuilt.
func TestArchiveReproducible(t *testing.T) {
	a, _ := release(t, platforms[:1])
	b, _ := release(t, platforms[:1])
	name := ArchiveName("v1.2.3", "linux", "amd64")
	x, _ := os.ReadFile(filepath.Join(a, name))
	y, _ := os.ReadFile(filepath.Join(b, name))
	if len(x) == 0 || !bytes.Equal(x, y) {
		t.Errorf("two builds of %s differ (%d and %d bytes)", name, len(x), len(y))
	}
}

func TestValidateRejects(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, dir, path string)
		want   string
	}{
		{"an archive changed after the manifest", func(t *testing.T, dir, _ string) {
			f := filepath.Join(dir, ArchiveName("v1.2.3", "linux", "arm64"))
			b, _ := os.ReadFile(f)
			if err := os.WriteFile(f, append(b, 0), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "platform linux/arm64: kubectl-emptydir_v1.2.3_linux_arm64.tar.gz has sha256"},
		{"an archive missing", func(t *testing.T, dir, _ string) {
			_ = os.Remove(filepath.Join(dir, ArchiveName("v1.2.3", "darwin", "amd64")))
		}, "platform darwin/amd64: open"},
		{"a version without v", edit("version: v1.2.3", "version: 1.2.3"), `spec.version "1.2.3"`},
		{"no short description", edit("shortDescription: Show emptyDir and ephemeral storage vs limits", "shortDescription: \"\""), "spec.shortDescription"},
		{"a field krew does not know", edit("kind: Plugin", "kind: Plugin\nextra: 1"), `unknown field "extra"`},
		{"two entries for a platform", edit("arch: arm64", "arch: amd64"), "want a distinct os and arch"},
		{"a bin the archive lacks", edit("bin: kubectl-emptydir.exe", "bin: kubectl-emptydir"), "not the bin kubectl-emptydir"},
		{"a plain http uri", edit("uri: https://", "uri: http://"), "want an https uri"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, path := release(t, platforms)
			tc.change(t, dir, path)
			err := Validate(path, dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want %q in it", err, tc.want)
			}
		})
	}
}

// edit replaces the first old of the manifest by repl.
func edit(old, repl string) func(*testing.T, string, string) {
	return func(t *testing.T, _, path string) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(b, []byte(old)) {
			t.Fatalf("manifest lacks %q", old)
		}
		if err := os.WriteFile(path, bytes.Replace(b, []byte(old), []byte(repl), 1), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
