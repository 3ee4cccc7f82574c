package main

import (
	"errors"
	"fmt"
	"os"
	"sync"
)

// errFatal unwinds the demo from a Fatal call to run, which then runs the cleanups.
var errFatal = errors.New("demo failed")

// runner gives the framework's helpers, written for tests, what they need of a test
// (framework.TB): failures are printed to stderr, and cleanups run when the demo ends, in
// reverse order, whatever way it ends.
type runner struct {
	mu       sync.Mutex
	failed   bool
	cleanups []func()
}

// run calls f, stopping at its first Fatal, and then the cleanups.
func (r *runner) run(f func()) {
	defer r.runCleanups()
	defer func() {
		if v := recover(); v != nil {
			if err, ok := v.(error); !ok || !errors.Is(err, errFatal) {
				panic(v)
			}
		}
	}()
	f()
}

func (r *runner) runCleanups() {
	for {
		r.mu.Lock()
		n := len(r.cleanups)
		if n == 0 {
			r.mu.Unlock()
			return
		}
		f := r.cleanups[n-1]
		r.cleanups = r.cleanups[:n-1]
		r.mu.Unlock()
		f()
	}
}

func (r *runner) Helper() {}

func (r *runner) Errorf(format string, args ...any) {
	r.mu.Lock()
	r.failed = true
	r.mu.Unlock()
	fmt.Fprintf(os.Stderr, "demo: FAILED: "+format+"\n", args...)
}

func (r *runner) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	panic(errFatal)
}

func (r *runner) Fatal(args ...any) { r.Fatalf("%s", fmt.Sprint(args...)) }

func (r *runner) Logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}

func (r *runner) Cleanup(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cleanups = append(r.cleanups, f)
}

func (r *runner) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}
