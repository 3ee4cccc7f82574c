package podcgroup_test

import (
	"testing"

	"github.com/emptydir-guard/emptydir-guard/internal/fswalk/fswalktest"
)

// TestStubsKeepTheAPI: the !linux stubs declare what the Linux files do (make vet's windows
// pass checks only the split's packages).
func TestStubsKeepTheAPI(t *testing.T) {
	fswalktest.RequireSameAPI(t, "github.com/emptydir-guard/emptydir-guard/internal/podcgroup", "linux", "windows", "darwin")
}
