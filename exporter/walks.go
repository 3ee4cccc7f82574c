package exporter

import (
	"context"
	"errors"
	"sync"
	"time"
)

// errPending marks a volume whose first measurement has not completed yet.
var errPending = errors.New("first measurement still running")

// volumeWalks measures the volumes of a VolumeSource in the background, each with
// its own bounded time, so that no volume can starve another: at most one walk per
// volume is in flight, at most cap(slots) run at once, and each ends after timeout.
// A walk may outlive the cycle that started it; every cycle publishes the last
// completed result of each volume, whose MeasuredAt shows how old it is.
type volumeWalks struct {
	source  VolumeSource
	timeout time.Duration
	slots   chan struct{}
	// done receives every completed walk, for counting and logging, once.
	done func(VolumeResult)

	mu      sync.Mutex
	running map[volumeKey]*inflight
	latest  map[volumeKey]VolumeResult
}

// inflight is the walk of one volume under way: a periodic one, or a live request's.
type inflight struct {
	done   chan struct{}      // closed when a periodic walk has ended; nil for a live one
	cancel context.CancelFunc // ends a periodic walk early; nil for a live one
}

func newVolumeWalks(source VolumeSource, concurrency int, timeout time.Duration, done func(VolumeResult)) *volumeWalks {
	return &volumeWalks{
		source: source, timeout: timeout, slots: make(chan struct{}, concurrency), done: done,
		running: map[volumeKey]*inflight{}, latest: map[volumeKey]VolumeResult{},
	}
}

// beginLive hands the volumes keys to a live walk that is about to start. A periodic walk
// of them in flight is cancelled, since the live walk redoes its work and both would share
// the node's CPU and disk (a big volume's live walk could then outlast its bound), and none
// starts until the live walk ends. end records the live walk's successful results as the
// volumes' latest measurement, which the next cycle publishes, and gives the volumes back.
func (w *volumeWalks) beginLive(keys []volumeKey) (end func([]VolumeResult)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	mine := map[volumeKey]*inflight{}
	for _, k := range keys {
		f := w.running[k]
		if f != nil && f.cancel == nil {
			continue // another live walk has it: both measure, that one records
		}
		if f != nil {
			f.cancel()
		}
		mine[k] = &inflight{}
		w.running[k] = mine[k]
	}
	return func(results []VolumeResult) {
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, r := range results {
			k := volumeKey{r.UID, r.Volume.Name}
			if _, ok := mine[k]; ok && r.Err == nil {
				w.latest[k] = r
			}
		}
		for k, f := range mine {
			if w.running[k] == f {
				delete(w.running, k)
			}
		}
	}
}

// cycle starts a walk, under walksCtx, for every volume of pods that has none in
// flight, waits for the walks it started until they end or cycleCtx does, and
// returns the last completed result of every volume of pods, in order: Err set
// when that walk failed (errVolumeAbsent when the volume is not there while its pod
// is Settling), errPending when none has completed yet.
func (w *volumeWalks) cycle(cycleCtx, walksCtx context.Context, pods []PodVolumes) []VolumeResult {
	var started []chan struct{}
	current := map[volumeKey]bool{}
	w.mu.Lock()
	for _, p := range pods {
		for _, v := range p.Volumes {
			k := volumeKey{p.UID, v.Name}
			current[k] = true
			if _, inFlight := w.running[k]; inFlight {
				continue
			}
			ctx, cancel := context.WithCancel(walksCtx)
			f := &inflight{done: make(chan struct{}), cancel: cancel}
			w.running[k] = f
			started = append(started, f.done)
			go w.walk(ctx, k, p, v, f)
		}
	}
	for k := range w.latest {
		if !current[k] {
			delete(w.latest, k) // the pod or volume is gone
		}
	}
	w.mu.Unlock()

	for _, ch := range started {
		select {
		case <-ch:
		case <-cycleCtx.Done():
		}
	}

	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]VolumeResult, 0, len(current))
	for _, p := range pods {
		for _, v := range p.Volumes {
			r, ok := w.latest[volumeKey{p.UID, v.Name}]
			if !ok {
				r = VolumeResult{Err: errPending}
			}
			// The spec (limit) may have changed since the walk; the numbers have not.
			r.Namespace, r.Pod, r.UID, r.Volume = p.Namespace, p.Pod, p.UID, v
			out = append(out, r)
		}
	}
	return out
}

// walk measures one volume once a slot is free, within its own timeout. A walk whose
// context ends early (shutdown, or a live walk took the volume over) leaves no result.
func (w *volumeWalks) walk(ctx context.Context, k volumeKey, p PodVolumes, v Volume, f *inflight) {
	defer func() {
		w.mu.Lock()
		if w.running[k] == f {
			delete(w.running, k)
		}
		w.mu.Unlock()
		f.cancel()
		close(f.done)
	}()
	select {
	case w.slots <- struct{}{}:
		defer func() { <-w.slots }()
	case <-ctx.Done():
		return
	}
	walkCtx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	r := VolumeResult{Namespace: p.Namespace, Pod: p.Pod, UID: p.UID, Volume: v}
	r.Measurement, r.Err = w.source.MeasureVolume(walkCtx, p, v)
	r.Err = absentWhileSettling(p, r.Err)
	if ctx.Err() != nil {
		return // shutting down, or taken over by a live walk: not a result
	}
	w.mu.Lock()
	w.latest[k] = r
	w.mu.Unlock()
	w.done(r)
}
