package security

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var (
	buildOnce sync.Once
	binDir    string
	built     bool // binDir is ours to remove
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if built {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// binary returns the path of one of the project's commands: from EMPTYDIR_GUARD_BIN_DIR when
// set (make builds them first), else built once per test run from the working tree.
func binary(t *testing.T, name string) string {
	t.Helper()
	buildOnce.Do(func() {
		if dir := os.Getenv("EMPTYDIR_GUARD_BIN_DIR"); dir != "" {
			binDir = dir
			return
		}
		binDir, buildErr = os.MkdirTemp("", "emptydir-guard-security-bin-")
		if buildErr != nil {
			return
		}
		built = true
		if out, err := exec.Command("go", "build", "-o", binDir+"/", "../../cmd/...").CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/...: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	p := filepath.Join(binDir, name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("binary %s: %v (run `make build` or unset EMPTYDIR_GUARD_BIN_DIR)", name, err)
	}
	return p
}
