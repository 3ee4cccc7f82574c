// Package framework holds what the real-cluster tests (test/e2e) and the demo (test/cmd/demo)
// share on top of the cluster harness (test/cluster): the project's processes in the cluster's
// network namespace, the monitoring and remediation stack, pods and their fate, webhooks,
// scrapes, and the du oracle.
package framework

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"sync"
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
	rootOnce.Do(func() { root = findRoot() })
	return filepath.Join(root, rel)
}

const rootModule = "module github.com/emptydir-guard/emptydir-guard\n"

var (
	rootOnce sync.Once
	root     string
)

// findRoot returns the nearest directory at or above the working directory whose go.mod is the
// root module's: tests run in their package's directory, programs from anywhere in the checkout.
// Only then this source file's path, which a -trimpath build (make's) does not know.
func findRoot() string {
	if dir, err := os.Getwd(); err == nil {
		for {
			if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && bytes.Contains(b, []byte(rootModule)) {
				return dir
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}
