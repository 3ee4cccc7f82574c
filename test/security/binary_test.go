package security

import (
	"os"
	"testing"

	"github.com/emptydir-guard/emptydir-guard/internal/testbin"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testbin.Cleanup()
	os.Exit(code)
}
