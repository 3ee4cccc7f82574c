package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

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
		{args: []string{"version"}, code: 0, stdout: "kubectl-emptydir, version"},
		{args: []string{"--help"}, code: 0, stdout: "kubectl emptydir [command]"},
		{args: []string{"completion", "bash"}, code: 0, stdout: "bash completion"},
		{args: []string{"--bogus"}, code: 1, stderr: "error: unknown flag: --bogus", usageHint: true},
		{args: []string{"version", "-o", "name"}, code: 1, stderr: `output format "name"`, usageHint: true},
		{args: []string{"version", "extra"}, code: 1, stderr: "unknown command", usageHint: true},
		{args: []string{"top", "extra"}, code: 1, stderr: `unknown command "extra"`, usageHint: true},
		{args: []string{"explain"}, code: 1, stderr: "accepts 1 arg(s), received 0", usageHint: true},
		{args: []string{"explain", "a", "b"}, code: 1, stderr: "accepts 1 arg(s), received 2", usageHint: true},
		{args: []string{"top", "--concurrency", "0"}, code: 1, stderr: "--concurrency must be at least 1", usageHint: true},
		{args: []string{"explain", "web", "--prometheus-url", "http://p:9090"}, code: 1, stderr: "does not read Prometheus", usageHint: true},
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

// TestSubcommandsShareOptions: every registered subcommand inherits the shared flags.
func TestSubcommandsShareOptions(t *testing.T) {
	root := newRootCmd(genericiooptions.NewTestIOStreamsDiscard())
	for _, c := range root.Commands() {
		if c.Name() == "help" || c.Name() == "completion" {
			continue
		}
		for _, f := range []string{"kubeconfig", "context", "namespace", "output", "no-headers", "prometheus-url", "guard-namespace"} {
			if c.InheritedFlags().Lookup(f) == nil {
				t.Errorf("%s has no --%s", c.CommandPath(), f)
			}
		}
	}
}
