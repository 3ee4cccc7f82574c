package ocimage

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParseOptions(t *testing.T) {
	valid := []string{"--binaries", "linux/arm64=b/arm,linux/amd64=b/amd", "--version", "v1.2.3", "--revision", "abc", "--out", "bin/image"}
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	withEpoch := env(map[string]string{"SOURCE_DATE_EPOCH": "1700000000"})

	o, err := ParseOptions(valid, withEpoch, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := []PlatformBinaries{{Platform{"linux", "amd64"}, "b/amd"}, {Platform{"linux", "arm64"}, "b/arm"}}
	if !slices.Equal(o.Binaries, want) || o.Version != "v1.2.3" || o.Revision != "abc" || o.SourceDateEpoch != 1700000000 || o.CABundle != DefaultCABundle || o.Out != "bin/image" {
		t.Errorf("ParseOptions = %+v", o)
	}
	o, err = ParseOptions(append(slices.Clone(valid), "--source-date-epoch", "42"), withEpoch, io.Discard)
	if err != nil || o.SourceDateEpoch != 42 {
		t.Errorf("--source-date-epoch 42 over $SOURCE_DATE_EPOCH: %d, %v", o.SourceDateEpoch, err)
	}
	if _, err := ParseOptions([]string{"-h"}, withEpoch, io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: %v, want flag.ErrHelp", err)
	}

	// set replaces (or with "" removes) a flag of valid.
	set := func(name, value string) []string {
		var out []string
		for i := 0; i < len(valid); i += 2 {
			if valid[i] != name {
				out = append(out, valid[i], valid[i+1])
			}
		}
		if value != "" {
			out = append(out, name, value)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		args []string
		env  func(string) string
		want string
	}{
		{"no binaries", set("--binaries", ""), withEpoch, "--binaries is empty"},
		{"no dir", set("--binaries", "linux/amd64"), withEpoch, `"linux/amd64": want os/arch=dir`},
		{"no arch", set("--binaries", "linux=b"), withEpoch, "want os/arch=dir"},
		{"empty dir", set("--binaries", "linux/amd64="), withEpoch, "want os/arch=dir"},
		{"not linux", set("--binaries", "darwin/arm64=b"), withEpoch, "only linux images"},
		{"unknown arch", set("--binaries", "linux/mips=b"), withEpoch, `unsupported architecture "mips"`},
		{"platform twice", set("--binaries", "linux/amd64=a,linux/amd64=b"), withEpoch, "platform linux/amd64 given twice"},
		{"empty version", set("--version", ""), withEpoch, "--version is empty"},
		{"version not a tag", set("--version", "v1.2.3+build"), withEpoch, "not a valid image tag"},
		{"empty revision", set("--revision", ""), withEpoch, "--revision is empty"},
		{"no epoch", valid, env(nil), "SOURCE_DATE_EPOCH is empty"},
		{"bad epoch", valid, env(map[string]string{"SOURCE_DATE_EPOCH": "yesterday"}), `--source-date-epoch "yesterday"`},
		{"negative epoch", append(slices.Clone(valid), "--source-date-epoch", "-1"), withEpoch, `--source-date-epoch "-1"`},
		{"epoch past USTAR", append(slices.Clone(valid), "--source-date-epoch", "9999999999"), withEpoch, "0 to 8589934591"},
		{"empty CA bundle", append(slices.Clone(valid), "--ca-bundle", ""), withEpoch, "--ca-bundle is empty"},
		{"no out", set("--out", ""), withEpoch, "--out is empty"},
		{"extra argument", append(slices.Clone(valid), "extra"), withEpoch, "unexpected arguments"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseOptions(tc.args, tc.env, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParseOptions(%q) = %v, want an error with %q", tc.args, err, tc.want)
			}
		})
	}
}

// TestBadInputs: every problem with the files named is reported, with the exit status 1, and
// nothing is written.
func TestBadInputs(t *testing.T) {
	bins := binaries(t)
	dirs := map[string]string{}
	for _, b := range bins {
		dirs[b.Platform.String()] = b.Dir
	}
	tmp := t.TempDir()
	onlyExporter := filepath.Join(tmp, "only-exporter")
	if err := os.MkdirAll(onlyExporter, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dirs["linux/amd64"], "emptydir-exporter"), filepath.Join(onlyExporter, "emptydir-exporter")); err != nil {
		t.Fatal(err)
	}
	notALayout := filepath.Join(tmp, "not-a-layout")
	if err := os.MkdirAll(notALayout, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(notALayout, "keep"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ca := testCABundle(t)
	notPEM := filepath.Join(tmp, "not-pem.crt")
	if err := os.WriteFile(notPEM, []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name     string
		binaries string
		ca, out  string
		want     []string
	}{
		{"a command missing", "linux/amd64=" + onlyExporter, ca, "", []string{"linux/amd64: missing command", "emptydir-remediator"}},
		{"no such directory", "linux/amd64=" + filepath.Join(tmp, "nowhere"), ca, "", []string{"emptydir-exporter", "emptydir-remediator"}},
		{"wrong architecture", "linux/arm64=" + dirs["linux/amd64"], ca, "", []string{"linux/arm64:", "built for EM_X86_64", "not arm64"}},
		{"no CA bundle", "linux/amd64=" + dirs["linux/amd64"], filepath.Join(tmp, "none.crt"), "", []string{"--ca-bundle", "make deps"}},
		{"CA bundle without certificates", "linux/amd64=" + dirs["linux/amd64"], notPEM, "", []string{"holds no PEM certificate"}},
		{"out is something else", "linux/amd64=" + dirs["linux/amd64"], ca, notALayout, []string{"is not an OCI image layout"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := tc.out
			if out == "" {
				out = filepath.Join(t.TempDir(), "image")
			}
			var stdout, stderr bytes.Buffer
			args := []string{"--binaries", tc.binaries, "--version", "v1.0.0", "--revision", "abc", "--source-date-epoch", "0", "--ca-bundle", tc.ca, "--out", out}
			if code := Run(args, func(string) string { return "" }, &stdout, &stderr); code != 1 {
				t.Errorf("exit %d, want 1; stderr:\n%s", code, stderr.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr %q lacks %q", stderr.String(), w)
				}
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout %q, want nothing", stdout.String())
			}
			if tc.out == "" {
				if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s was written (%v)", out, err)
				}
			} else if entries, _ := os.ReadDir(out); len(entries) != 1 {
				t.Errorf("%s was changed: %v", out, entries)
			}
			if leftovers, _ := filepath.Glob(filepath.Join(filepath.Dir(out), ".*.tmp-*")); len(leftovers) != 0 {
				t.Errorf("temporary directories left: %v", leftovers)
			}
		})
	}

	var stderr bytes.Buffer
	if code := Run([]string{"--version", ""}, func(string) string { return "" }, io.Discard, &stderr); code != 2 || !strings.Contains(stderr.String(), "--binaries is empty") || !strings.Contains(stderr.String(), "--version is empty") {
		t.Errorf("bad flags: exit %d, stderr %q: want 2 and every problem", code, stderr.String())
	}
}
