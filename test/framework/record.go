package framework

import (
	"os"

	"github.com/emptydir-guard/emptydir-guard/internal/docsection"
)

// RecordEnv names the variable that lets the suites write their figures into the docs:
// `RECORD=1 make test-cluster`. Without it a green run leaves the tree as it found it.
const RecordEnv = "RECORD"

// Recording reports whether this run writes its figures into the docs.
func Recording() bool { return os.Getenv(RecordEnv) == "1" }

// RecordDoc sets the generated section of the Markdown file at rel (relative to the
// repository root) to body when Recording, naming test as its generator; otherwise it only
// logs body, so the figures of every run are still in its output.
func RecordDoc(t TB, rel, section, test, body string) {
	t.Helper()
	if !Recording() {
		t.Logf("%s, section %s (not written: set %s=1 to record it):\n%s", rel, section, RecordEnv, body)
		return
	}
	if err := docsection.Replace(RepoPath(rel), section, RecordEnv+"=1 make test-cluster: "+test, body); err != nil {
		t.Errorf("recording into %s: %v", rel, err)
	}
}
