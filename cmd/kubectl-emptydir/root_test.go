package main

import (
	"bytes"
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// runCmd runs the command line args as a user would and returns its exit code and streams.
func runCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := newRootCmd(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	code = execute(context.Background(), root, args)
	return code, out.String(), errOut.String()
}

func TestExitCodes(t *testing.T) {
	for _, tc := range []struct {
		args      []string
		code      int
		stdout    string
		stderr    string
		usageHint bool
	}{
		{args: []string{"version"}, code: 0, stdout: "kubectl-emptydir "},
		{args: []string{"version", "-o", "json"}, code: 0, stdout: `"goVersion": "go`},
		{args: []string{"version", "-o", "yaml"}, code: 0, stdout: "goVersion: go"},
		{args: []string{"--help"}, code: 0, stdout: "kubectl emptydir [command]"},
		{args: []string{"options"}, code: 0, stdout: "--kubeconfig string"},
		{args: []string{"completion", "bash"}, code: 0, stdout: "bash completion"},
		{args: []string{"--bogus"}, code: 1, stderr: "error: unknown flag: --bogus", usageHint: true},
		{args: []string{"version", "-o", "name"}, code: 1, stderr: `output format "name", allowed formats are: json,yaml`, usageHint: true},
		{args: []string{"version", "extra"}, code: 1, stderr: "unknown command", usageHint: true},
		{args: []string{"top", "a", "b"}, code: 1, stderr: "accepts at most 1 arg(s), received 2", usageHint: true},
		{args: []string{"top", "a", "-A"}, code: 1, stderr: "a pod cannot be retrieved by name across all namespaces", usageHint: true},
		{args: []string{"top", "a", "-l", "app=a"}, code: 1, stderr: "only one of POD or -l", usageHint: true},
		{args: []string{"top", "--sort-by", "memory"}, code: 1, stderr: "--sort-by accepts only percent, used, limit", usageHint: true},
		{args: []string{"top", "-o", "patch"}, code: 1, stderr: `output format "patch", allowed formats are: go-template,`, usageHint: true},
		{args: []string{"top", "-o", "jsonpath={.items["}, code: 1, stderr: "unterminated array", usageHint: true},
		{args: []string{"explain"}, code: 1, stderr: "accepts 1 arg(s), received 0", usageHint: true},
		{args: []string{"explain", "a", "b"}, code: 1, stderr: "accepts 1 arg(s), received 2", usageHint: true},
		{args: []string{"explain", "web", "-o", "wide"}, code: 1, stderr: `output format "wide"`, usageHint: true},
		{args: []string{"top", "--concurrency", "0"}, code: 1, stderr: "--concurrency must be at least 1", usageHint: true},
		{args: []string{"top", "--guard-namespace", ""}, code: 1, stderr: "--guard-namespace must not be empty", usageHint: true},
		// Flags only where they apply: explain reads no Prometheus, version no cluster.
		{args: []string{"explain", "web", "--prometheus-url", "http://p:9090"}, code: 1, stderr: "unknown flag: --prometheus-url", usageHint: true},
		{args: []string{"policy-check", "--guard-namespace", "x"}, code: 1, stderr: "unknown flag: --guard-namespace", usageHint: true},
		{args: []string{"version", "--no-headers"}, code: 1, stderr: "unknown flag: --no-headers", usageHint: true},
		{args: []string{"top", "--help"}, code: 0, stdout: "kubectl emptydir top -A -l app=web"},
		{args: []string{"no-such-command"}, code: 1, stderr: `unknown command "no-such-command"`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, stdout, stderr := runCmd(t, tc.args...)
			if code != tc.code {
				t.Errorf("exit code %d, want %d (stderr %q)", code, tc.code, stderr)
			}
			if !strings.Contains(stdout, tc.stdout) {
				t.Errorf("stdout %q, want it to contain %q", stdout, tc.stdout)
			}
			if !strings.Contains(stderr, tc.stderr) {
				t.Errorf("stderr %q, want it to contain %q", stderr, tc.stderr)
			}
			if tc.usageHint != strings.Contains(stderr, "--help' for usage") {
				t.Errorf("stderr %q: usage hint %v, want %v", stderr, !tc.usageHint, tc.usageHint)
			}
		})
	}
}

// TestVersionOneLine: version prints one line, as kubectl-emptydir VERSION (revision REV,
// GO, OS/ARCH).
func TestVersionOneLine(t *testing.T) {
	_, stdout, _ := runCmd(t, "version")
	if !regexp.MustCompile(`^kubectl-emptydir \S+ \(revision \S+, go\S+, \w+/\w+\)\n$`).MatchString(stdout) {
		t.Errorf("version printed %q, want one line", stdout)
	}
}

// TestFlagsPerCommand: each command has the flags that apply to it, no other, and kubectl's
// client flags globally, as kubectl's commands do.
func TestFlagsPerCommand(t *testing.T) {
	output := []string{"output", "template"}
	table := append([]string{"no-headers"}, output...)
	want := map[string][]string{
		"top":          append([]string{"all-namespaces", "selector", "node", "sort-by", "concurrency", "prometheus-url", "guard-namespace"}, table...),
		"explain":      append([]string{"guard-namespace"}, output...),
		"recommend":    append([]string{"all-namespaces", "selector", "window", "min-history", "step", "quantile", "headroom", "source", "requests", "prometheus-url"}, table...),
		"policy-check": append([]string{"all-namespaces", "policy"}, table...),
		"version":      {"output"},
		"options":      nil,
	}
	root := newRootCmd(genericiooptions.NewTestIOStreamsDiscard())
	for _, c := range root.Commands() {
		if c.Name() == "help" || c.Name() == "completion" {
			continue
		}
		w, ok := want[c.Name()]
		if !ok {
			t.Errorf("%s: no flags listed for it here", c.Name())
			continue
		}
		var got []string
		c.LocalNonPersistentFlags().VisitAll(func(f *pflag.Flag) {
			if !f.Hidden && f.Name != "help" {
				got = append(got, f.Name)
			}
		})
		slices.Sort(got)
		slices.Sort(w)
		if !slices.Equal(got, w) {
			t.Errorf("%s has flags %q, want %q", c.Name(), got, w)
		}
		for _, f := range []string{"kubeconfig", "context", "namespace", "as", "request-timeout"} {
			if c.InheritedFlags().Lookup(f) == nil {
				t.Errorf("%s does not take --%s", c.CommandPath(), f)
			}
		}
	}
}

// TestHelpShort: every command's --help, the root's too, is under 30 lines and leaves
// kubectl's client flags to `options`, as kubectl's own --help does.
func TestHelpShort(t *testing.T) {
	var paths [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		paths = append(paths, path)
		for _, sub := range c.Commands() {
			if !sub.Hidden {
				walk(sub, append(slices.Clone(path), sub.Name()))
			}
		}
	}
	root := newRootCmd(genericiooptions.NewTestIOStreamsDiscard())
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	walk(root, nil)
	if len(paths) < 12 {
		t.Fatalf("walked %q only", paths)
	}
	for _, path := range paths {
		t.Run(strings.Join(append([]string{"kubectl emptydir"}, path...), " "), func(t *testing.T) {
			code, stdout, stderr := runCmd(t, append(path, "--help")...)
			lines := strings.Count(stdout, "\n")
			if code != 0 || lines >= 30 || lines < 5 {
				t.Errorf("exit %d, %d lines (want under 30), stderr %q:\n%s", code, lines, stderr, stdout)
			}
			if strings.Contains(stdout, "--kubeconfig") || strings.Contains(stdout, "--as-group") || strings.Contains(stdout, "Global Flags") {
				t.Errorf("kubectl's client flags listed:\n%s", stdout)
			}
			if !strings.Contains(stdout, `Use "kubectl emptydir options" for a list of global command-line options`) {
				t.Errorf("no hint to options:\n%s", stdout)
			}
		})
	}
}
