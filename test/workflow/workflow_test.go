// Package workflow checks the release workflow (.github/workflows/release.yml) stays a thin
// caller of the Makefile: it runs the targets TestReleaseFromRegistry (test/e2e) runs against a
// registry of its own, so a tag publishes what `make test` proved.
package workflow

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

type workflow struct {
	On struct {
		Push struct {
			Tags []string `yaml:"tags"`
		} `yaml:"push"`
	} `yaml:"on"`
	Jobs map[string]struct {
		Permissions map[string]string `yaml:"permissions"`
		Steps       []struct {
			Name string `yaml:"name"`
			Uses string `yaml:"uses"`
			Run  string `yaml:"run"`
		} `yaml:"steps"`
	} `yaml:"jobs"`
}

// The actions a step may use: the checkout and the Go toolchain. Everything else is make's.
var allowedActions = []string{"actions/checkout", "actions/setup-go"}

func TestReleaseWorkflowIsAThinCallerOfMake(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, ".github", "workflows", "release.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var wf workflow
	// YAML 1.2 (yaml/v3): the key "on" is a string, not YAML 1.1's boolean.
	if err := yaml.Unmarshal(b, &wf); err != nil {
		t.Fatalf("release.yml: %v", err)
	}
	if !slices.ContainsFunc(wf.On.Push.Tags, func(p string) bool { return strings.HasPrefix(p, "v") }) {
		t.Errorf("release.yml runs on tags %q, want the release tags v*", wf.On.Push.Tags)
	}
	if len(wf.Jobs) == 0 {
		t.Fatal("release.yml has no job")
	}
	var targets []string
	for name, job := range wf.Jobs {
		// Keyless signing needs the job's OIDC token; publishing needs packages: write.
		for perm, want := range map[string]string{"id-token": "write", "packages": "write"} {
			if job.Permissions[perm] != want {
				t.Errorf("job %s: permission %s is %q, want %q", name, perm, job.Permissions[perm], want)
			}
		}
		for _, s := range job.Steps {
			switch {
			case s.Uses != "":
				action, _, _ := strings.Cut(s.Uses, "@")
				if !slices.Contains(allowedActions, action) {
					t.Errorf("job %s step %q uses %s: only %v; everything else belongs in the Makefile", name, s.Name, s.Uses, allowedActions)
				}
			case s.Run != "":
				for line := range strings.Lines(strings.TrimSpace(s.Run)) {
					ts, ok := makeTargets(line)
					if !ok {
						t.Errorf("job %s step %q runs %q: a release step runs make, nothing else", name, s.Name, strings.TrimSpace(line))
						continue
					}
					targets = append(targets, ts...)
				}
			}
		}
	}
	// The target the real-cluster test runs against its own registry.
	if !slices.Contains(targets, "release") {
		t.Errorf("release.yml runs make %q, not `make release` (what TestReleaseFromRegistry proves)", targets)
	}
	// Every target exists. make -q runs no recipe (-n would run those naming $(MAKE)) and exits
	// 1 for a target to remake, 2 for an error such as an unknown target.
	cmd := exec.Command("make", append([]string{"-q", "-C", root}, targets...)...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if err != nil && (!errors.As(err, &ee) || ee.ExitCode() != 1) {
		t.Errorf("make -q %s: %v\n%s", strings.Join(targets, " "), err, out)
	}
}

// makeTargets returns the targets of a `make ...` command line (its words that are neither flags,
// variables nor redirections), and false for any other command.
func makeTargets(line string) ([]string, bool) {
	words := strings.Fields(line)
	if len(words) == 0 || words[0] != "make" {
		return nil, false
	}
	var out []string
	for _, w := range words[1:] {
		if strings.HasPrefix(w, "<") || strings.HasPrefix(w, ">") || w == "|" || w == "&&" || w == ";" {
			break
		}
		if strings.HasPrefix(w, "-") || strings.Contains(w, "=") || strings.HasPrefix(w, "\"") {
			continue
		}
		out = append(out, w)
	}
	return out, len(out) > 0
}

func TestMakeTargets(t *testing.T) {
	for _, tc := range []struct {
		line string
		want []string
		ok   bool
	}{
		{"make release", []string{"release"}, true},
		{`make registry-login <<< "$TOKEN"`, []string{"registry-login"}, true},
		{"make push-image REGISTRY=r.example/x > out", []string{"push-image"}, true},
		{"make -s test-image test-helm", []string{"test-image", "test-helm"}, true},
		{"make", nil, false},
		{"curl -sSL x | sh", nil, false},
		{"docker push x", nil, false},
	} {
		got, ok := makeTargets(tc.line)
		if ok != tc.ok || !slices.Equal(got, tc.want) {
			t.Errorf("makeTargets(%q) = %q, %v; want %q, %v", tc.line, got, ok, tc.want, tc.ok)
		}
	}
}
