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
	if p := NewProgress(&b, "reading exporters", 3); p != nil {
		t.Error("a buffer got a progress")
	}
	f, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if p := NewProgress(f, "reading exporters", 3); p != nil {
		t.Error("a file got a progress")
	}
	var nilp *Progress
	nilp.Step()
	nilp.Doing("pods per workload")
	nilp.Finish()

	p := &Progress{w: &b, what: "reading exporters", of: 2, start: time.Now().Add(-time.Second), showAfter: 500 * time.Millisecond}
	p.Step()
	p.Step()
	p.Finish()
	if want := "\rreading exporters: 1/2\rreading exporters: 2/2\r\033[K"; b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}

// TestProgressDoing: the query being sent shows at once, each over the line before (a
// shorter name leaves nothing of a longer one), and the line is cleared at the end.
func TestProgressDoing(t *testing.T) {
	var b bytes.Buffer
	p := &Progress{w: &b, what: "querying Prometheus", start: time.Now(), showAfter: time.Hour}
	p.Doing("pods per workload")
	p.Doing("volume usage")
	p.Finish()
	if want := "\r\033[Kquerying Prometheus: pods per workload\r\033[Kquerying Prometheus: volume usage\r\033[K"; b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}

	// Nothing shown, nothing to clear.
	b.Reset()
	quiet := &Progress{w: &b, what: "reading exporters", of: 2, start: time.Now(), showAfter: time.Hour}
	quiet.Step()
	quiet.Finish()
	if b.Len() != 0 {
		t.Errorf("a quick fan-out wrote %q", b.String())
	}
}
