// Package logwatch tells when a container's log directory is written to. A container's logs are
// written by its runtime, outside the pod's cgroup, so no change mark of the pod moves with
// them, and a burst of log lines waits for the next cycle's walk; the kubelet, which reads
// them from the runtime, is then quicker. The directories watched are the kubelet's, chosen by the
// exporter from pods with a limit; what a tenant writes only says "look again", never where.
package logwatch

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"golang.org/x/time/rate"
)

// Pod names the pod a directory's logs belong to.
type Pod struct{ Namespace, Name, UID string }

// Defaults of Config: a burst is looked at Settle after its first write, and a pod's logs at
// most once each Gap, however much it logs.
const (
	DefaultSettle = 100 * time.Millisecond
	DefaultGap    = time.Second
	// DefaultPerSecond bounds the calls for all pods: many pods logging on and on are then
	// looked at less often, each at the cycle's pace at worst, and cost a bounded CPU.
	DefaultPerSecond = 20
)

// Config of a Watcher.
type Config struct {
	// Written is called with a pod whose log directories were written to, on a goroutine of its
	// own per call, at most once per Gap per pod.
	Written func(Pod)
	// Settle is how long after a quiet pod's first write Written is called; Gap the least time
	// between two calls for one pod; PerSecond the most calls a second for all pods, beyond
	// which calls wait their turn (0: the defaults).
	Settle, Gap time.Duration
	PerSecond   float64
	Logger      *slog.Logger
}

// Watcher watches a set of log directories (Watch) with inotify.
type Watcher struct {
	cfg    Config
	notify *fsnotify.Watcher
	limit  *rate.Limiter

	mu      sync.Mutex
	dirs    map[string]Pod
	pods    map[string]*podState // by UID
	refused map[string]bool      // directories inotify refused, warned once each
}

type podState struct {
	timer *time.Timer
	last  time.Time
}

// New starts watching nothing; Run reads its events.
func New(cfg Config) (*Watcher, error) {
	if cfg.Written == nil {
		return nil, errors.New("logwatch: Config.Written is required")
	}
	if cfg.Settle <= 0 {
		cfg.Settle = DefaultSettle
	}
	if cfg.Gap <= 0 {
		cfg.Gap = DefaultGap
	}
	if cfg.PerSecond <= 0 {
		cfg.PerSecond = DefaultPerSecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	n, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("inotify: %w", err)
	}
	return &Watcher{cfg: cfg, notify: n, limit: rate.NewLimiter(rate.Limit(cfg.PerSecond), 1), dirs: map[string]Pod{}, pods: map[string]*podState{}, refused: map[string]bool{}}, nil
}

// Watch makes dirs (directory → its pod) the directories watched: new ones are added, those no longer
// named removed. A directory not there yet (a container starting) is tried again at the next call.
func (w *Watcher) Watch(dirs map[string]Pod) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for dir := range w.dirs {
		if _, keep := dirs[dir]; !keep {
			_ = w.notify.Remove(dir) // gone with its container: inotify may have dropped it already
			delete(w.dirs, dir)
		}
	}
	for dir, p := range dirs {
		if _, ok := w.dirs[dir]; ok {
			continue
		}
		if err := w.notify.Add(dir); err != nil {
			if !w.refused[dir] && !errors.Is(err, fs.ErrNotExist) {
				w.refused[dir] = true
				w.cfg.Logger.Debug("a log directory is not watched; its logs are walked at the cycle's pace", "dir", dir, "err", err)
			}
			continue
		}
		delete(w.refused, dir)
		w.dirs[dir] = p
	}
	uids := map[string]bool{}
	for _, p := range w.dirs {
		uids[p.UID] = true
	}
	for uid, st := range w.pods {
		if !uids[uid] && st.timer == nil {
			delete(w.pods, uid)
		}
	}
}

// Watched is how many directories are watched.
func (w *Watcher) Watched() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.dirs)
}

// Run reads the events until ctx ends, then stops watching.
func (w *Watcher) Run(ctx context.Context) {
	defer func() {
		w.mu.Lock()
		for _, st := range w.pods {
			if st.timer != nil {
				st.timer.Stop()
			}
		}
		w.mu.Unlock()
		_ = w.notify.Close()
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.notify.Events:
			if !ok {
				return
			}
			if ev.Has(fsnotify.Write) || ev.Has(fsnotify.Create) || ev.Has(fsnotify.Rename) {
				w.written(filepath.Dir(ev.Name))
			}
		case err, ok := <-w.notify.Errors:
			if !ok {
				return
			}
			// An overflowed queue loses events, not the cycle's walks of the logs.
			w.cfg.Logger.Debug("log directory events lost", "err", err)
		}
	}
}

// written schedules Written for the pod of dir: Settle after a quiet pod's write, else once its
// Gap since the last call has passed, and in its turn of PerSecond; writes meanwhile join the
// call scheduled.
func (w *Watcher) written(dir string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	p, ok := w.dirs[dir]
	if !ok {
		return
	}
	st := w.pods[p.UID]
	if st == nil {
		st = &podState{}
		w.pods[p.UID] = st
	}
	if st.timer != nil {
		return
	}
	delay := max(w.cfg.Settle, time.Until(st.last.Add(w.cfg.Gap)), w.limit.Reserve().Delay())
	st.timer = time.AfterFunc(delay, func() {
		w.mu.Lock()
		st.timer, st.last = nil, time.Now()
		w.mu.Unlock()
		w.cfg.Written(p)
	})
}
