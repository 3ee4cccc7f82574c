package plugin

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/term"
)

// Progress shows on a terminal's stderr how far a slow command is, so that a query over a
// large fleet does not look hung: the queries finished ("\rreading exporters: 12/40") or the
// one being sent ("querying Prometheus: volume usage"). A nil *Progress does nothing.
type Progress struct {
	mu        sync.Mutex
	w         io.Writer
	what      string
	done, of  int
	start     time.Time
	showAfter time.Duration
	shown     bool
}

// NewProgress returns the progress of `what` on w, counting towards `of` queries (0 when
// only Doing names them), or nil when w is not a terminal (a pipe, a file, CI): scripts read
// stderr too.
func NewProgress(w io.Writer, what string, of int) *Progress {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	return &Progress{w: w, what: what, of: of, start: time.Now(), showAfter: 500 * time.Millisecond}
}

// Step counts one finished query. The count shows once the command has taken showAfter, so
// that a quick fan-out writes nothing.
func (p *Progress) Step() {
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

// Doing shows the query being sent, at once (each one takes a while, such as a fleet's
// history), over whatever the line held.
func (p *Progress) Doing(query string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.shown = true
	fmt.Fprintf(p.w, "\r\033[K%s: %s", p.what, query)
}

// Finish clears the line, if one was written.
func (p *Progress) Finish() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shown {
		fmt.Fprint(p.w, "\r\033[K")
	}
}
