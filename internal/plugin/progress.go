package plugin

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/term"
)

// progress counts finished queries on a terminal's stderr ("\rexporters: 12/40 nodes"), so
// that a query over a large fleet does not look hung. It shows nothing when stderr is no
// terminal (a pipe, a file, CI) or until the query has taken showAfter.
type progress struct {
	mu        sync.Mutex
	w         io.Writer
	what      string
	done, of  int
	start     time.Time
	showAfter time.Duration
	shown     bool
}

// newProgress returns a progress of `of` queries for w, or nil (which does nothing) when w is
// not a terminal.
func newProgress(w io.Writer, what string, of int) *progress {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	return &progress{w: w, what: what, of: of, start: time.Now(), showAfter: 500 * time.Millisecond}
}

// step counts one finished query.
func (p *progress) step() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done++
	if time.Since(p.start) < p.showAfter {
		return
	}
	p.shown = true
	fmt.Fprintf(p.w, "\r%s: %d/%d", p.what, p.done, p.of)
}

// finish clears the line, if one was written.
func (p *progress) finish() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shown {
		fmt.Fprint(p.w, "\r\033[K")
	}
}
