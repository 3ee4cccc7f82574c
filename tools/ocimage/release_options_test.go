package ocimage

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
)

func TestParseReleaseOptions(t *testing.T) {
	// registry.example is no loopback address: its scheme is https unless --plain-http says
	// otherwise.
	const registry = "registry.example:5000"
	amd64, arm64 := Platform{"linux", "amd64"}, Platform{"linux", "arm64"}
	for _, tc := range []struct {
		name      string
		args      []string
		command   string
		layout    string
		repo      string // push: the repository's name
		image     string // check: the reference's name
		platforms []Platform
		scheme    string // the registry's
	}{
		{
			name:    "push",
			args:    []string{"push", "--layout", "bin/image", "--repository", registry + "/emptydir-guard"},
			command: "push", layout: "bin/image", repo: registry + "/emptydir-guard", scheme: "https",
		},
		{
			name:    "push over plain HTTP",
			args:    []string{"push", "--plain-http", "--layout=bin/image", "--repository=" + registry + "/team/emptydir-guard"},
			command: "push", layout: "bin/image", repo: registry + "/team/emptydir-guard", scheme: "http",
		},
		{
			name:    "check, platforms separated by a space",
			args:    []string{"check", "--image", registry + "/emptydir-guard:v1.2.3", "--platforms", "linux/amd64 linux/arm64"},
			command: "check", image: registry + "/emptydir-guard:v1.2.3", platforms: []Platform{amd64, arm64}, scheme: "https",
		},
		{
			name:    "check over plain HTTP, platforms separated by commas and spaces",
			args:    []string{"check", "--image", registry + "/emptydir-guard:v1.2.3", "--platforms", " linux/arm64, linux/amd64,,", "--plain-http"},
			command: "check", image: registry + "/emptydir-guard:v1.2.3", platforms: []Platform{arm64, amd64}, scheme: "http",
		},
		{
			name:    "check by digest",
			args:    []string{"check", "--image", registry + "/emptydir-guard@sha256:" + strings.Repeat("ab", 32), "--platforms", "linux/s390x"},
			command: "check", image: registry + "/emptydir-guard@sha256:" + strings.Repeat("ab", 32), platforms: []Platform{{"linux", "s390x"}}, scheme: "https",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := ParseReleaseOptions(tc.args, io.Discard)
			if err != nil {
				t.Fatalf("ParseReleaseOptions(%q): %v", tc.args, err)
			}
			if o.Command != tc.command || o.Layout != tc.layout || !slices.Equal(o.Platforms, tc.platforms) || o.PlainHTTP != (tc.scheme == "http") {
				t.Errorf("ParseReleaseOptions(%q) = %+v", tc.args, o)
			}
			switch tc.command {
			case "push":
				if got := o.Repo.Name(); got != tc.repo {
					t.Errorf("repository %q, want %q", got, tc.repo)
				}
				if got := o.Repo.Scheme(); got != tc.scheme {
					t.Errorf("the repository's scheme is %s, want %s", got, tc.scheme)
				}
				if o.Image != nil {
					t.Errorf("push has an image: %v", o.Image)
				}
			case "check":
				if o.Image == nil {
					t.Fatal("check has no image")
				}
				if got := o.Image.Name(); got != tc.image {
					t.Errorf("image %q, want %q", got, tc.image)
				}
				if got := o.Image.Context().Scheme(); got != tc.scheme {
					t.Errorf("the image's scheme is %s, want %s", got, tc.scheme)
				}
			}
		})
	}

	for _, args := range [][]string{{"-h"}, {"--help"}, {"push", "-h"}, {"check", "-h"}} {
		var usage bytes.Buffer
		if _, err := ParseReleaseOptions(args, &usage); !errors.Is(err, flag.ErrHelp) {
			t.Errorf("%q: %v, want flag.ErrHelp", args, err)
		}
		if !strings.Contains(usage.String(), "ocirelease push") || !strings.Contains(usage.String(), "ocirelease check") {
			t.Errorf("%q printed %q, want the usage", args, usage.String())
		}
	}

	push := func(extra ...string) []string {
		return append([]string{"push", "--layout", "bin/image", "--repository", registry + "/emptydir-guard"}, extra...)
	}
	check := func(extra ...string) []string {
		return append([]string{"check", "--image", registry + "/emptydir-guard:v1.2.3"}, extra...)
	}
	for _, tc := range []struct {
		name string
		args []string
		want []string // each in the error
	}{
		{"no command", nil, []string{"want a command, push or check"}},
		{"flags before the command", []string{"--layout", "bin/image", "push"}, []string{"want a command, push or check"}},
		{"unknown command", []string{"pull", "--image", registry + "/emptydir-guard:v1"}, []string{"want a command, push or check"}},
		{"no layout", []string{"push", "--repository", registry + "/emptydir-guard"}, []string{"--layout is empty"}},
		{"empty layout", push("--layout", ""), []string{"--layout is empty"}},
		{"no repository", []string{"push", "--layout", "bin/image"}, []string{`--repository ""`}},
		{"repository with upper case", []string{"push", "--layout", "bin/image", "--repository", registry + "/EmptyDir"}, []string{`--repository "` + registry + `/EmptyDir"`}},
		{"repository with a tag", []string{"push", "--layout", "bin/image", "--repository", registry + "/emptydir-guard:v1"}, []string{"--repository", "emptydir-guard:v1"}},
		{"repository without a registry", []string{"push", "--layout", "bin/image", "--repository", "emptydir-guard"}, []string{`--repository "emptydir-guard"`}},
		{"check flag on push", push("--image", registry+"/emptydir-guard:v1"), []string{"-image"}},
		{"push: unexpected argument", push("extra"), []string{`unexpected arguments ["extra"]`}},
		{"no image", []string{"check", "--platforms", "linux/amd64"}, []string{`--image ""`}},
		{"bad image", check("--platforms", "linux/amd64", "--image", registry+"/emptydir-guard:v1:v2"), []string{"--image", "emptydir-guard:v1:v2"}},
		{"no platforms", check(), []string{"--platforms is empty"}},
		{"empty platforms", check("--platforms", ""), []string{"--platforms is empty"}},
		{"blank platforms", check("--platforms", " , "), []string{"--platforms is empty"}},
		{"platform without arch", check("--platforms", "linux/amd64,linux"), []string{`--platforms: "linux": want os/arch`}},
		{"platform without os", check("--platforms", "/arm64"), []string{`"/arm64": want os/arch`}},
		{"platform with empty arch", check("--platforms", "linux/ linux/amd64"), []string{`"linux/": want os/arch`}},
		{"push flag on check", check("--platforms", "linux/amd64", "--layout", "bin/image"), []string{"-layout"}},
		{"check: unexpected argument", check("--platforms", "linux/amd64", "extra"), []string{`unexpected arguments ["extra"]`}},
		{"every problem", []string{"push", "--layout", "", "--repository", "Bad", "extra"}, []string{"unexpected arguments", "--layout is empty", `--repository "Bad"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := ParseReleaseOptions(tc.args, io.Discard)
			if err == nil {
				t.Fatalf("ParseReleaseOptions(%q) = %+v, want an error with %q", tc.args, o, tc.want)
			}
			if errors.Is(err, flag.ErrHelp) {
				t.Fatalf("ParseReleaseOptions(%q): flag.ErrHelp", tc.args)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("ParseReleaseOptions(%q) = %v, want an error with %q", tc.args, err, w)
				}
			}
		})
	}
}
