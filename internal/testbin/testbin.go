// Package testbin gives tests the project's commands as binaries: those `make build` put in
// EMPTYDIR_GUARD_BIN_DIR, or else built once per test binary from the working tree, static
// as make builds them, so the tests exercise the code under test.
package testbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
)

// DirEnv names the directory of prebuilt commands.
const DirEnv = "EMPTYDIR_GUARD_BIN_DIR"

var (
	once     sync.Once
	dir      string
	builtDir bool // dir is ours to remove
	buildErr error
)

// TB is what Path needs of a test; testing.TB has it, and so do programs that reuse test
// helpers (the demo).
type TB interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// Path returns the path of the command name, building all commands on first use.
func Path(t TB, name string) string {
	t.Helper()
	once.Do(build)
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	p := filepath.Join(dir, name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("binary %s: %v (run `make build` or unset %s)", name, err, DirEnv)
	}
	return p
}

func build() {
	if d := os.Getenv(DirEnv); d != "" {
		dir = d
		return
	}
	dir, buildErr = os.MkdirTemp("", "emptydir-guard-bin-")
	if buildErr != nil {
		return
	}
	builtDir = true
	// Binaries may run as another user (a container's); let anyone execute them.
	_ = os.Chmod(dir, 0o755)
	cmd := exec.Command("go", "build", "-trimpath", "-o", dir+"/", "github.com/emptydir-guard/emptydir-guard/cmd/...")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		buildErr = fmt.Errorf("go build ./cmd/...: %w\n%s", err, out)
	}
}

// Cleanup removes the directory Path built, if any; call it from TestMain after m.Run.
func Cleanup() {
	if builtDir {
		_ = os.RemoveAll(dir)
	}
}
