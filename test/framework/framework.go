// Package framework holds what the real-cluster tests (test/e2e) and the demo (test/cmd/demo)
// share on top of the cluster harness (test/cluster): the project's processes in the cluster's
// network namespace, the monitoring and remediation stack, pods and their fate, webhooks,
// scrapes, and the du oracle.
package framework

import (
	"path/filepath"
	"runtime"
)

// TB is what the framework needs of a test. testing.TB has it; so does the demo's runner,
// which is a program and not a test.
type TB interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Errorf(format string, args ...any)
	Logf(format string, args ...any)
	Cleanup(func())
	Failed() bool
}

// RepoPath returns the path of rel, a path relative to the repository's root, wherever the
// test or the program runs from.
func RepoPath(rel string) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", rel)
}
