package framework

import (
	"os"
	"strings"
	"testing"
)

// TestRepoPathUnderTrimpath: the real-cluster tests read the repository's files (the README,
// the Alertmanager configuration, the docs) through RepoPath, also when make builds them with
// -trimpath, where this source's path is only its import path.
func TestRepoPathUnderTrimpath(t *testing.T) {
	b, err := os.ReadFile(RepoPath("go.mod"))
	if err != nil {
		t.Fatalf("RepoPath(go.mod): %v", err)
	}
	if !strings.Contains(string(b), rootModule) {
		t.Fatalf("RepoPath(go.mod) = %s is not the root module's go.mod", RepoPath("go.mod"))
	}
	if _, err := os.Stat(RepoPath("deploy/alertmanager/alertmanager.yml")); err != nil {
		t.Fatalf("RepoPath(deploy/alertmanager/alertmanager.yml): %v", err)
	}
}
