package exportertest

import (
	"context"
	"sync"

	"github.com/emptydir-guard/emptydir-guard/exporter/part"
)

// Gate holds measurements until the test lets them go: the walk of a huge or hostile volume,
// or a request the test wants in flight. A request passes it through Hold or HoldPastContext,
// each a Before hook, or called from a MeasureFunc to hold one volume. Safe for concurrent use.
type Gate struct {
	started chan string
	release chan struct{}
	open    sync.Once

	mu   sync.Mutex
	held int
	err  error
}

// startedBuffer is how many unread starts Started keeps; later ones are not reported, so that
// a test that does not read it never blocks a measurement.
const startedBuffer = 64

// NewGate returns a gate that holds every request until Release or Open.
func NewGate() *Gate {
	return &Gate{started: make(chan string, startedBuffer), release: make(chan struct{})}
}

// Hold holds a request until the gate lets it go or ctx ends (Err then says why): it counts
// the request (Held) and reports its first pod's name on Started.
func (g *Gate) Hold(ctx context.Context, pods []part.Pod) {
	g.arrive(pods)
	select {
	case <-g.release:
	case <-ctx.Done():
		g.mu.Lock()
		g.err = ctx.Err()
		g.mu.Unlock()
	}
}

// HoldPastContext is Hold that goes on after ctx has ended, until the gate lets it go: a walk
// in a system call that has not seen the cancellation yet.
func (g *Gate) HoldPastContext(_ context.Context, pods []part.Pod) {
	g.arrive(pods)
	<-g.release
}

func (g *Gate) arrive(pods []part.Pod) {
	g.mu.Lock()
	g.held++
	g.mu.Unlock()
	name := ""
	if len(pods) > 0 {
		name = pods[0].Pod
	}
	select {
	case g.started <- name:
	default:
	}
}

// Started receives the pod of each request as the gate starts holding it.
func (g *Gate) Started() <-chan string { return g.started }

// Release lets one held request go, waiting for one to arrive if none is held.
func (g *Gate) Release() { g.release <- struct{}{} }

// Open lets every held and later request go. It may be called more than once.
func (g *Gate) Open() { g.open.Do(func() { close(g.release) }) }

// Held is how many requests the gate has held, those let go included.
func (g *Gate) Held() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.held
}

// Err is the error of the latest context that ended a Hold; nil if none did.
func (g *Gate) Err() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err
}
