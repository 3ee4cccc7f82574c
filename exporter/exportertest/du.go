package exportertest

import (
	"testing"

	"github.com/emptydir-guard/emptydir-guard/test/duoracle"
)

// DuBytes is the oracle: GNU `du -s -B1` of dir.
func DuBytes(t testing.TB, dir string) int64 {
	t.Helper()
	n, err := duoracle.Of(dir)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
