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
	running map[volumeKey]chan struct{} // closed when the walk has completed
	latest  map[volumeKey]VolumeResult
}

func newVolumeWalks(source VolumeSource, concurrency int, timeout time.Duration, done func(VolumeResult)) *volumeWalks {
	return &volumeWalks{
		source: source, timeout: timeout, slots: make(chan struct{}, concurrency), done: done,
		running: map[volumeKey]chan struct{}{}, latest: map[volumeKey]VolumeResult{},
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
			ch := make(chan struct{})
			w.running[k] = ch
			started = append(started, ch)
			go w.walk(walksCtx, k, p, v, ch)
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

// walk measures one volume once a slot is free, within its own timeout.
func (w *volumeWalks) walk(ctx context.Context, k volumeKey, p PodVolumes, v Volume, ch chan struct{}) {
	defer func() {
		w.mu.Lock()
		delete(w.running, k)
		w.mu.Unlock()
		close(ch)
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
		return // shutting down: not a result
	}
	w.mu.Lock()
	w.latest[k] = r
	w.mu.Unlock()
	w.done(r)
}
