package logwatch

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// recorder counts the calls of Written by pod UID.
type recorder struct {
	mu    sync.Mutex
	calls map[string]int
}

func (r *recorder) written(p Pod) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls[p.UID]++
}

func (r *recorder) count(uid string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[uid]
}

// started is a running Watcher with a short settle and gap, and its recorder.
func started(t *testing.T) (*Watcher, *recorder) {
	t.Helper()
	r := &recorder{calls: map[string]int{}}
	w, err := New(Config{Written: r.written, Settle: 20 * time.Millisecond, Gap: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return w, r
}

func appendLine(t *testing.T, file string) {
	t.Helper()
	f, err := os.OpenFile(file, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("2026-12-07T21:00:00.000000000Z stdout F a log line\n"); err != nil {
		t.Fatal(err)
	}
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for stop := time.Now().Add(5 * time.Second); time.Now().Before(stop); time.Sleep(5 * time.Millisecond) {
		if ok() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// A burst of writes to a watched directory is told once, soon; a pod logging on and on is told
// at most once per gap; a directory not watched, or no longer, is never told.
func TestWrittenOncePerBurstAndGap(t *testing.T) {
	w, r := started(t)
	root := t.TempDir()
	app, other := filepath.Join(root, "ns_app_u1", "app"), filepath.Join(root, "ns_other_u2", "main")
	for _, d := range []string{app, other} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	w.Watch(map[string]Pod{app: {"ns", "app", "u1"}})
	if w.Watched() != 1 {
		t.Fatalf("%d directories watched, want 1", w.Watched())
	}

	for range 200 {
		appendLine(t, filepath.Join(app, "0.log"))
	}
	appendLine(t, filepath.Join(other, "0.log"))
	waitFor(t, "the burst told", func() bool { return r.count("u1") == 1 })
	time.Sleep(400 * time.Millisecond) // past the gap: nothing more was written
	if n := r.count("u1"); n != 1 {
		t.Errorf("a burst of 200 writes told %d times, want once", n)
	}

	// Logging on and on for 1.2 s: at most one call per 300ms gap, and the last writes told.
	start, before := time.Now(), r.count("u1")
	for time.Since(start) < 1200*time.Millisecond {
		appendLine(t, filepath.Join(app, "0.log"))
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(400 * time.Millisecond)
	if n := r.count("u1") - before; n < 3 || n > 6 {
		t.Errorf("1.2 s of writes told %d times, want one per 300ms gap (3 to 6)", n)
	}
	if n := r.count("u2"); n != 0 {
		t.Errorf("a directory not watched told %d times", n)
	}

	// Rotated: the kubelet renames 0.log and creates it anew.
	before = r.count("u1")
	if err := os.Rename(filepath.Join(app, "0.log"), filepath.Join(app, "0.log.20261207-210000")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the rotation told", func() bool { return r.count("u1") > before })

	w.Watch(nil)
	time.Sleep(400 * time.Millisecond)
	before = r.count("u1")
	appendLine(t, filepath.Join(app, "0.log"))
	time.Sleep(100 * time.Millisecond)
	if n := r.count("u1") - before; n != 0 || w.Watched() != 0 {
		t.Errorf("a directory no longer watched told %d times (%d watched)", n, w.Watched())
	}
}

// A directory that is not there yet (its container starting) is watched once a later Watch finds it.
func TestWatchLater(t *testing.T) {
	w, r := started(t)
	dir := filepath.Join(t.TempDir(), "ns_app_u1", "app")
	set := map[string]Pod{dir: {"ns", "app", "u1"}}
	w.Watch(set)
	if w.Watched() != 0 {
		t.Fatalf("%d directories watched, want none: it does not exist", w.Watched())
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	w.Watch(set)
	appendLine(t, filepath.Join(dir, "0.log"))
	waitFor(t, "the write told", func() bool { return r.count("u1") == 1 })
}

// Many pods logging at once are told at most PerSecond times a second in all, each in its turn.
func TestWrittenBoundedForAllPods(t *testing.T) {
	r := &recorder{calls: map[string]int{}}
	w, err := New(Config{Written: r.written, Settle: time.Millisecond, Gap: time.Millisecond, PerSecond: 10})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	root := t.TempDir()
	set := map[string]Pod{}
	for i := range 20 {
		uid := string(rune('a' + i))
		dir := filepath.Join(root, uid)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		set[dir] = Pod{"ns", uid, uid}
	}
	w.Watch(set)
	start := time.Now()
	for dir := range set {
		appendLine(t, filepath.Join(dir, "0.log"))
	}
	waitFor(t, "every pod told", func() bool {
		for _, p := range set {
			if r.count(p.UID) == 0 {
				return false
			}
		}
		return true
	})
	// 20 calls at 10 a second (a burst of 1): about 1.9 s.
	if took := time.Since(start); took < 1500*time.Millisecond {
		t.Errorf("20 pods told in %s, want at 10 a second (about 1.9 s)", took)
	}
}
