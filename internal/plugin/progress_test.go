package plugin

import (
	"bytes"
	"os"
	"testing"
	"time"
)

// TestProgressOnlyOnATerminal: a pipe or a file gets no progress lines (scripts read stderr
// too); a terminal gets "\rwhat: n/of" once the query took showAfter, and the line cleared.
func TestProgressOnlyOnATerminal(t *testing.T) {
	var b bytes.Buffer
	if p := newProgress(&b, "reading exporters", 3); p != nil {
		t.Error("a buffer got a progress")
	}
	f, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if p := newProgress(f, "reading exporters", 3); p != nil {
		t.Error("a file got a progress")
	}
	var nilp *progress
	nilp.step()
	nilp.finish()

	p := &progress{w: &b, what: "reading exporters", of: 2, start: time.Now().Add(-time.Second), showAfter: 500 * time.Millisecond}
	p.step()
	p.step()
	p.finish()
	if want := "\rreading exporters: 1/2\rreading exporters: 2/2\r\033[K"; b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}
