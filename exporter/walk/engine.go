package walk

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emptydir-guard/emptydir-guard/exporter/budget"
	"github.com/emptydir-guard/emptydir-guard/exporter/change"
	"github.com/emptydir-guard/emptydir-guard/exporter/part"
	"github.com/emptydir-guard/emptydir-guard/exporter/schedule"
	"github.com/emptydir-guard/emptydir-guard/internal/fswalk"
)

// errPending marks a volume whose first measurement has not completed yet, although due: a
// failure of the cycle, until it completes.
var errPending = errors.New("first measurement still running")

// ErrAwaitingSlowWalk marks a volume without a sizeLimit whose first walk has not completed
// yet: it runs in the background at the slow cadence, within the CPU budget (deferrals are
// counted), so not measured yet is no failure, on a node where pods come and go every cycle.
var ErrAwaitingSlowWalk = errors.New("first slow-cadence walk not completed yet")

// Config is what the engine walks and how; package exporter fills it from its own Config,
// whose fields name the flags.
type Config struct {
	// Node is the value of the node label of the engine's series.
	Node string
	// Source measures one volume at a time.
	Source part.Measurer
	// Concurrency bounds the walks under way at once, and Timeout each walk.
	Concurrency int
	Timeout     time.Duration
	// UnlimitedInterval is how often a volume without a sizeLimit is walked; 0: every cycle.
	UnlimitedInterval time.Duration
	// CPUBudget is the share of one core the walks may spend (0: no bound), and
	// CPUBudgetCapacity what its bucket saves up (0: CPUBudget's share of UnlimitedInterval,
	// at least of one minute).
	CPUBudget         float64
	CPUBudgetCapacity time.Duration
	// ProcessCPU is the CPU time the whole process has spent so far. Set, everything the
	// process spends but the floor walks (a debt of their own, budget.Bucket.WithFloor) drains
	// the budget: scrapes, change marks, live walks and the runtime too, so the process stays
	// within CPUBudget over time. nil: only the walks on the budget's credit drain it.
	ProcessCPU func() time.Duration
	// Signal is the change signal; nil: every part is due at its cadence. SkipUnchanged and
	// RuntimeClasses (besides the node's default runtime, whose pods' marks are read) go with it.
	Signal         change.Signal
	SkipUnchanged  bool
	RuntimeClasses []string
	// Now is the clock.
	Now func() time.Time
	// Logger receives the first missing change mark of each reason at warning level.
	Logger *slog.Logger
	// Done receives every completed walk, for counting and logging, once; required.
	Done func(part.Result)
	// PodNow is a pod as the informer knows it now; false when it is gone. nil: a walk is
	// judged by the cycle's list alone.
	PodNow func(part.Pod) (part.Pod, bool)
}

// Engine measures the volumes of a Measurer in the background, each with its own bounded
// time, so that no volume can starve another: at most one walk per volume is in flight, at
// most cap(slots) run at once, and each ends after Config.Timeout. A walk may outlive the
// cycle that started it; every cycle publishes the last completed result of each volume,
// whose MeasuredAt shows how old it is.
type Engine struct {
	cfg     Config
	slots   chan struct{} // Config.Concurrency of them
	metrics *metrics
	// informerLag is how long absent waits for PodNow to show a deletion.
	informerLag time.Duration
	// budget is the token bucket of Config.CPUBudget, and floor each namespace's part of it,
	// which its overdue walks start on; both nil without a budget.
	budget *budget.Bucket
	floor  *budget.Floor
	// carriedBy is Config.RuntimeClasses and "", the node's default runtime: the RuntimeClasses
	// whose pods' marks are read.
	carriedBy map[string]bool
	// creditCPU and floorCPU are the CPU time the periodic walks started on the budget's
	// credit (or without a budget) and on the floor have spent, as their threads counted it.
	creditCPU, floorCPU atomic.Int64
	// dispatching is the previous cycle's background dispatch of walks of volumes without
	// a sizeLimit; a cycle starts once it has ended.
	dispatching sync.WaitGroup
	// walking counts the walks under way, for Wait.
	walking sync.WaitGroup

	mu      sync.Mutex
	running map[part.Key]*inflight
	// walkEnded is closed, and replaced, whenever a periodic walk ends.
	walkEnded chan struct{}
	// volumes is what the walks remember of each volume of the pods the last cycle listed.
	volumes map[part.Key]*volumeRecord
	// namespaces is what the walks of each namespace of the pods the last cycle listed (and of
	// those with walks still under way) have spent, for the metrics.
	namespaces map[string]*namespaceWalks
}

// namespaceWalks is what the periodic walks of one namespace's pods have spent.
type namespaceWalks struct {
	cpu atomic.Int64 // as their threads count it
	// floorWalks counts its walks started on its part of the floor.
	floorWalks int
}

// volumeRecord is what the walks remember of one volume: what schedules its next walks
// (schedule.State; InFlight is not kept here but read from running) and the result of its
// last completed walk, which every cycle publishes.
type volumeRecord struct {
	schedule.State
	latest *part.Result // nil until a walk completes
	// mark is its pod's change mark read before its last complete walk began; nil: none
	// (no signal, a failed or lower-bound walk, a live one).
	mark *change.Mark
	// unchangedAt is when a cycle last found the pod's mark still mark; zero: none since.
	unchangedAt time.Time
	// liveCost is what its last live walk cost (a walk cut short: the most one cost); 0: none
	// known. A live walk measures what a periodic one may read from a quota, so State.Cost may
	// be much less.
	liveCost time.Duration
	// incompleteSince is when the first of the volume's consecutive lower-bound walks started,
	// periodic and live ones alike (volume.IncompleteSince); zero while its last completed walk
	// was complete. A failed walk changes nothing.
	incompleteSince time.Time
}

// noteWalk appends r, a completed walk of the volume, to its run of lower bounds and sets
// r.IncompleteSince from it. Callers hold w.mu.
func (rec *volumeRecord) noteWalk(r *part.Result) {
	if r.Err != nil {
		return
	}
	rec.incompleteSince = part.IncompleteSince(rec.incompleteSince, r.Measurement)
	r.IncompleteSince = rec.incompleteSince
}

// record is volume k's record, created when there is none. Callers hold w.mu.
func (w *Engine) record(k part.Key) *volumeRecord {
	r := w.volumes[k]
	if r == nil {
		r = &volumeRecord{}
		w.volumes[k] = r
	}
	return r
}

// inflight is the walk of one volume under way: a periodic one, or a live request's.
type inflight struct {
	done      chan struct{}      // closed when a periodic walk has ended; nil for a live one
	cancel    context.CancelFunc // ends a periodic walk early; nil for a live one
	namespace string             // of a periodic walk's pod
	// floor: a periodic walk started on its namespace's part of the floor, which estimate
	// was set aside of until it ends.
	floor    bool
	estimate time.Duration
}

// New returns the engine of cfg, no walk started.
func New(cfg Config) *Engine {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	w := &Engine{
		cfg: cfg, slots: make(chan struct{}, cfg.Concurrency), informerLag: defaultInformerLag,
		metrics: newMetrics(cfg.Node, cfg.Signal != nil, cfg.Logger),
		running: map[part.Key]*inflight{}, volumes: map[part.Key]*volumeRecord{}, walkEnded: make(chan struct{}),
		namespaces: map[string]*namespaceWalks{},
	}
	w.carriedBy = map[string]bool{"": true}
	for _, rc := range cfg.RuntimeClasses {
		w.carriedBy[rc] = true
	}
	if cfg.CPUBudget > 0 {
		capacity := cfg.CPUBudgetCapacity
		if capacity <= 0 {
			capacity = time.Duration(cfg.CPUBudget * float64(max(cfg.UnlimitedInterval, time.Minute)))
		}
		drained := atomicDuration(&w.creditCPU)
		if cfg.ProcessCPU != nil {
			drained = func() time.Duration { return cfg.ProcessCPU() - time.Duration(w.floorCPU.Load()) }
		}
		w.budget = budget.New(cfg.CPUBudget, capacity, drained, cfg.Now).WithFloor(atomicDuration(&w.floorCPU))
		w.floor = budget.NewFloor(cfg.CPUBudget, capacity, cfg.Now)
	}
	return w
}

// Wait returns once every walk started has ended and no cycle is starting more.
func (w *Engine) Wait() {
	w.dispatching.Wait()
	w.walking.Wait()
}

// cpuSpent is the CPU time every periodic walk has spent so far.
func (w *Engine) cpuSpent() time.Duration {
	return time.Duration(w.creditCPU.Load() + w.floorCPU.Load())
}

// atomicDuration reads a CPU time total.
func atomicDuration(a *atomic.Int64) func() time.Duration {
	return func() time.Duration { return time.Duration(a.Load()) }
}

// Cycle starts, under walksCtx, the walks due now (schedule.Due), most urgent first, each
// when a slot is free and the CPU budget allows it, until cycleCtx ends; what it could not
// start is deferred to a later cycle and counted. It waits for the walks it started until
// they end or cycleCtx does, and returns the last completed result of every volume of pods,
// in order: Err set when that walk failed (volume.ErrVolumeAbsent when the volume is not there
// while its pod is Settling), errPending or ErrAwaitingSlowWalk (unmeasured) when none has
// completed yet. With a slow cadence for volumes without a sizeLimit, it returns once the
// walks of volumes with one have ended, which an over-limit alert waits for: the others
// (overdue ones first, in the cycle's own order) are published by the next cycle, those on
// time started in the background until cycleCtx's deadline.
// tolerance is how early a slow-cadence walk may come (half a cycle).
func (w *Engine) Cycle(cycleCtx, walksCtx context.Context, pods []part.Pod, tolerance time.Duration) []part.Result {
	w.dispatching.Wait() // the previous cycle's background walks are all started or deferred
	// Before now: a walk started this cycle begins after its pod's mark was read, so a write
	// in between changes the next mark, or the walk sees it.
	marks := w.readMarks(pods)
	now := w.cfg.Now()
	w.mu.Lock()
	namespaces := w.remember(pods, marks, now)
	due := w.due(pods, now, tolerance)
	w.mu.Unlock()

	if w.floor != nil {
		w.floor.Fill(namespaces)
	}
	foreground, others := due, []schedule.Walk(nil)
	if i := slices.IndexFunc(due, func(d schedule.Walk) bool { return d.Background }); i >= 0 {
		foreground, others = due[:i], due[i:]
	}
	shared := len(namespaces) > 1
	started := w.dispatch(cycleCtx, walksCtx, foreground, marks, now, shared)
	if len(others) > 0 {
		// Until the cycle's deadline, not until Cycle returns (Run then cancels cycleCtx).
		ctx, cancel := walksCtx, context.CancelFunc(func() {})
		if deadline, ok := cycleCtx.Deadline(); ok {
			ctx, cancel = context.WithDeadline(walksCtx, deadline)
		}
		w.dispatching.Add(1)
		go func() {
			defer w.dispatching.Done()
			defer cancel()
			w.dispatch(ctx, walksCtx, others, marks, now, shared)
		}()
	}
	for _, ch := range started {
		select {
		case <-ch:
		case <-cycleCtx.Done():
		}
	}
	return w.results(pods)
}

// keepMark keeps mark, the pod's mark read before walk r began (nil: none), as what vouches
// for r: only a complete walk's mark does, as a lower bound or a failure is walked again.
// Either way the part is no longer known unchanged since an earlier walk. Callers hold w.mu.
func (rec *volumeRecord) keepMark(r part.Result, mark *change.Mark) {
	rec.mark, rec.unchangedAt = nil, time.Time{}
	if r.Err == nil && !r.Measurement.LowerBound() {
		rec.mark = mark
	}
}

// markStill reports whether now, the pod's mark read this cycle, is the one kept by its last
// complete walk (keepMark). Callers hold w.mu.
func (rec *volumeRecord) markStill(now change.Mark) bool {
	return rec.mark != nil && *rec.mark == now
}

// remember notes the volumes of pods in their records (first seen, vouched unchanged by their
// pod's mark now), forgets the volumes and namespaces no longer listed, and returns the
// namespaces of pods. Callers hold w.mu.
func (w *Engine) remember(pods []part.Pod, marks map[string]change.Mark, at time.Time) map[string]bool {
	current := map[part.Key]bool{}
	namespaces := map[string]bool{}
	for _, p := range pods {
		namespaces[p.Namespace] = true
		w.namespaceOf(p.Namespace) // its series from its first cycle on
		for _, v := range p.Parts {
			k := part.Key{UID: p.UID, Name: v.Name}
			current[k] = true
			rec := w.record(k)
			if rec.Seen.IsZero() {
				rec.Seen = at
			}
			// Vouched unchanged: its pod's mark now is the one read before its last complete walk.
			markNow, read := marks[p.UID]
			if rec.Unchanged = read && rec.markStill(markNow) && w.cfg.Signal.Vouches(v); rec.Unchanged {
				rec.unchangedAt = at
			}
		}
	}
	for k := range w.volumes {
		if !current[k] {
			delete(w.volumes, k) // the pod or volume is gone
		}
	}
	for ns := range w.namespaces {
		if !namespaces[ns] && !w.walkingIn(ns) {
			delete(w.namespaces, ns) // its last pod is gone: its series go
		}
	}
	return namespaces
}

// due is what schedule.Due returns for pods now; with a signal, the parts their marks kept
// from being due are counted. Callers hold w.mu.
func (w *Engine) due(pods []part.Pod, now time.Time, tolerance time.Duration) []schedule.Walk {
	var costly time.Duration
	var share float64
	if w.budget != nil {
		costly, share = w.budget.Capacity(), w.budget.Share()
	}
	due := schedule.Due(pods, w.state, now, schedule.Policy{UnlimitedInterval: w.cfg.UnlimitedInterval, Tolerance: tolerance,
		Costly: costly, Share: share, SkipUnchanged: w.cfg.SkipUnchanged})
	if w.cfg.Signal != nil {
		w.metrics.unchanged.Add(float64(w.vouched(pods, due)))
	}
	return due
}

// results is the last completed result of every volume of pods, in order, for Cycle.
func (w *Engine) results(pods []part.Pod) []part.Result {
	n := 0
	for _, p := range pods {
		n += len(p.Parts)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]part.Result, 0, n)
	for _, p := range pods {
		for _, v := range p.Parts {
			rec := w.record(part.Key{UID: p.UID, Name: v.Name})
			var r part.Result
			switch {
			case rec.latest == nil:
				r = part.Result{Err: w.unmeasured(v)}
			case p.Settling && rec.latest.Err == nil && w.gone(p, v):
				// Its last walk may predate the teardown (the slow cadence, the budget): its
				// numbers would outlive the directory the kubelet has removed.
				r = part.Result{Err: part.ErrAbsent}
				rec.latest = nil
			default:
				r = *rec.latest
				if rec.unchangedAt.After(r.Measurement.MeasuredAt) {
					r.UnchangedAt = rec.unchangedAt
				}
			}
			// The spec (limit) may have changed since the walk; the numbers have not.
			r.Namespace, r.Pod, r.UID, r.Part = p.Namespace, p.Pod, p.UID, v
			out = append(out, r)
		}
	}
	return out
}

// unmeasured is the error of a volume none of whose walks has completed yet: one without a
// sizeLimit at the slow cadence (Config.UnlimitedInterval) is not measured yet by design.
func (w *Engine) unmeasured(v part.Part) error {
	if v.Guard() == nil && w.cfg.UnlimitedInterval > 0 {
		return ErrAwaitingSlowWalk
	}
	return errPending
}

// walkingIn reports whether a periodic walk of namespace ns is under way. Callers hold w.mu.
func (w *Engine) walkingIn(ns string) bool {
	for _, f := range w.running {
		if f.cancel != nil && f.namespace == ns {
			return true
		}
	}
	return false
}

// holdsItsShare reports whether the periodic walks running for namespace ns hold all the walk
// slots but one (one slot, with a single slot). A tenant can make its volumes slow to walk,
// or never done (until --collection.volume-timeout), and have them go first (never
// measured): with as many of them as slots, no other volume of the node would be walked
// again. So where pods of several namespaces run, one namespace never holds every slot.
func (w *Engine) holdsItsShare(ns string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, f := range w.running {
		if f.cancel != nil && f.namespace == ns {
			n++
		}
	}
	return n >= max(1, cap(w.slots)-1)
}

// takeSlot takes a walk slot for a walk of namespace ns, once one is free and (shared)
// ns holds less than its share; false when ctx ends first. A free slot is taken even when
// ctx has ended (select would pick at random between the two): the walk that frees it has
// been charged to the budget by then.
func (w *Engine) takeSlot(ctx context.Context, ns string, shared bool) bool {
	for {
		w.mu.Lock()
		ended := w.walkEnded
		w.mu.Unlock()
		if !shared || !w.holdsItsShare(ns) {
			select {
			case w.slots <- struct{}{}:
				return true
			default:
			}
		}
		select {
		case <-ended:
		case <-ctx.Done():
			return false
		}
	}
}

// dispatch starts the walks of due in order, each when a slot is free and the CPU budget
// allows it, until ctx ends, and returns a channel per walk started that the cycle waits
// for (schedule.Walk.Wait), closed when it ends. A complete walk vouches for its pod's mark in
// marks. What it could not start is deferred to a later cycle and counted: as unchanged when
// its pod's mark vouched it so (Walk.Unchanged), which is no shortfall of the budget or the
// slots.
func (w *Engine) dispatch(ctx, walksCtx context.Context, due []schedule.Walk, marks map[string]change.Mark, now time.Time, shared bool) []chan struct{} {
	var started []chan struct{}
	deferred, unchanged := map[string]int{}, 0 // deferred by reason
	defer func() {
		for reason, n := range deferred {
			w.metrics.deferred.WithLabelValues(reason).Add(float64(n))
		}
		if unchanged > 0 {
			w.metrics.unchanged.Add(float64(unchanged))
		}
	}()
	notStarted := func(d schedule.Walk, reason string) {
		if d.Unchanged {
			unchanged++
		} else {
			deferred[reason]++
		}
	}
	// On a node shared by namespaces, a walk that would give its namespace every slot goes
	// behind the others' walks, and starts only when its namespace holds fewer. An overdue
	// walk starts on its namespace's part of the floor; that part spent, it goes behind the
	// others' walks too, and starts on the bucket's credit if any is left. A namespace's part
	// serves its overdue walks in due's order, the longest waiting first: once one of them found
	// the part short, the later ones do not take what is left of it (their namespace's many
	// cheap walks would keep it from ever holding what a costlier one needs), and go behind.
	queue := slices.Clone(due)
	postponed, behind := map[part.Key]bool{}, map[part.Key]bool{}
	partShort := map[string]bool{} // namespaces whose part an overdue walk found short
	for len(queue) > 0 {
		d := queue[0]
		queue = queue[1:]
		if shared && !postponed[d.Key] && w.holdsItsShare(d.Pod.Namespace) {
			postponed[d.Key] = true
			queue = append(queue, d)
			continue
		}
		if !w.takeSlot(ctx, d.Pod.Namespace, shared) {
			notStarted(d, DeferredNoSlot)
			for _, l := range queue {
				notStarted(l, DeferredNoSlot)
			}
			return started
		}
		floor, estimate := false, time.Duration(0)
		switch {
		case w.budget == nil || d.Cheap:
		case d.Floor == schedule.FloorFirst && !behind[d.Key]:
			if !partShort[d.Pod.Namespace] {
				floor, estimate = w.takeFloor(d)
			}
			if !floor {
				partShort[d.Pod.Namespace] = true
				<-w.slots
				behind[d.Key] = true
				queue = append(queue, d)
				continue
			}
		case w.budget.Allows(d.Cost):
		case d.Floor == schedule.FloorAfter:
			if !partShort[d.Pod.Namespace] {
				floor, estimate = w.takeFloor(d)
			}
			if !floor {
				<-w.slots
				notStarted(d, DeferredCPUBudget)
				continue
			}
		default:
			<-w.slots
			notStarted(d, DeferredCPUBudget)
			continue
		}
		wctx, cancel := context.WithCancel(walksCtx)
		f := &inflight{done: make(chan struct{}), cancel: cancel, namespace: d.Pod.Namespace, floor: floor, estimate: estimate}
		w.mu.Lock()
		w.running[d.Key] = f
		w.record(d.Key).Started = now
		ns := w.namespaceOf(d.Pod.Namespace)
		if floor {
			ns.floorWalks++
		}
		w.mu.Unlock()
		if d.Wait {
			started = append(started, f.done)
		}
		w.walking.Add(1)
		charged := &w.creditCPU
		if floor {
			charged = &w.floorCPU
		}
		meter := fswalk.NewCPUMeter(charged, &ns.cpu)
		var mark *change.Mark // its pod's, if read
		if m, ok := marks[d.Pod.UID]; ok {
			mark = &m
		}
		go func() {
			defer w.walking.Done()
			w.walk(wctx, d, mark, f, meter)
		}()
	}
	return started
}

// takeFloor reports whether d may start on its namespace's part of the floor, and the
// estimate of its cost set aside there until it ends.
func (w *Engine) takeFloor(d schedule.Walk) (bool, time.Duration) {
	w.mu.Lock()
	s := w.state(d.Key)
	w.mu.Unlock()
	estimate := w.floor.Estimate(s.Cost, s.Measured)
	return w.floor.Take(d.Pod.Namespace, estimate), estimate
}

// walk measures one volume, holding a slot taken by dispatch, within its own timeout, and
// charges the CPU time its threads spend to meter, whose totals the budget drains, also when
// it fails or is cut short; a floor walk settles its namespace's part before its slot is freed.
// A complete walk keeps mark, its pod's mark read before it began (nil: none). A walk whose context ends
// early (shutdown, or a live walk took the volume over) leaves no result.
func (w *Engine) walk(ctx context.Context, d schedule.Walk, mark *change.Mark, f *inflight, meter *fswalk.CPUMeter) {
	defer func() {
		w.mu.Lock()
		if w.running[d.Key] == f {
			delete(w.running, d.Key)
		}
		close(w.walkEnded) // after the slot is freed (deferred below)
		w.walkEnded = make(chan struct{})
		w.mu.Unlock()
		f.cancel()
		close(f.done)
	}()
	defer func() { <-w.slots }()
	walkCtx, cancel := context.WithTimeout(ctx, w.cfg.Timeout)
	defer cancel()
	r := part.Result{Namespace: d.Pod.Namespace, Pod: d.Pod.Pod, UID: d.Pod.UID, Part: d.Volume}
	r.Measurement, r.Err = w.cfg.Source.MeasurePart(walkCtx, d.Pod, d.Volume, meter)
	r.Err = w.absent(ctx, d.Pod, r.Err)
	spent := meter.Spent()
	if f.floor {
		w.floor.Settle(d.Pod.Namespace, f.estimate, spent)
	}
	if ctx.Err() != nil {
		return // shutting down, or taken over by a live walk: not a result
	}
	w.mu.Lock()
	rec := w.record(d.Key)
	rec.noteWalk(&r)
	rec.latest = &r
	if r.Err == nil {
		rec.Cost, rec.UsedBytes, rec.Measured = spent, r.Measurement.UsedBytes, true
	}
	rec.keepMark(r, mark)
	w.mu.Unlock()
	w.cfg.Done(r)
}

// absent is volume.AbsentWhileSettling judged by the pod as it is when its walk ends, not only
// as the cycle listed it: a walk may start well after the cycle's list (the walks before it,
// the CPU budget), and a pod deleted meanwhile has its volumes torn down while the list
// still shows it running. The kubelet tears volumes down only once it has seen the pod
// deleted, and the exporter's informer may see the same deletion moments later, so a pod
// the informer still shows running gets up to informerLag to catch up before its missing
// directory counts as an error.
func (w *Engine) absent(ctx context.Context, p part.Pod, err error) error {
	if err = part.AbsentWhileSettling(p, err); err == nil || errors.Is(err, part.ErrAbsent) ||
		part.ReasonOf(err) != part.ReasonNotFound || w.cfg.PodNow == nil {
		return err
	}
	deadline := time.NewTimer(w.informerLag)
	defer deadline.Stop()
	poll := time.NewTicker(informerPoll)
	defer poll.Stop()
	for {
		if now, ok := w.cfg.PodNow(p); !ok || now.UID != p.UID || now.Settling {
			return part.ErrAbsent // deleted, replaced by a pod of the same name, or terminating
		}
		select {
		case <-poll.C:
		case <-deadline.C:
			return err
		case <-ctx.Done():
			return err
		}
	}
}

// informerPoll is how often absent looks at the informer again while it waits.
const informerPoll = 50 * time.Millisecond

// defaultInformerLag bounds how long a walk that found its volume missing waits for the
// informer to show the pod's deletion: watch events reach an exporter within moments, even
// on a busy API server.
const defaultInformerLag = 5 * time.Second

// volumeGoner is a Measurer that can tell cheaply that a volume's directory is not there.
type volumeGoner interface {
	VolumeGone(part.Pod, part.Part) bool
}

// gone reports whether the source knows volume v of pod p to be absent.
func (w *Engine) gone(p part.Pod, v part.Part) bool {
	g, ok := w.cfg.Source.(volumeGoner)
	return ok && g.VolumeGone(p, v)
}

// namespaceOf is what the walks of namespace ns have spent, created when there is none.
// Callers hold w.mu.
func (w *Engine) namespaceOf(ns string) *namespaceWalks {
	n := w.namespaces[ns]
	if n == nil {
		n = &namespaceWalks{}
		w.namespaces[ns] = n
	}
	return n
}

// vouched counts the parts of pods that their change marks kept from being due now: vouched
// unchanged, not in flight, not in due. Callers hold w.mu.
func (w *Engine) vouched(pods []part.Pod, due []schedule.Walk) int {
	isDue := make(map[part.Key]bool, len(due))
	for _, d := range due {
		isDue[d.Key] = true
	}
	n := 0
	for _, p := range pods {
		for _, v := range p.Parts {
			k := part.Key{UID: p.UID, Name: v.Name}
			if s := w.state(k); s.Unchanged && !s.InFlight && !isDue[k] {
				n++
			}
		}
	}
	return n
}

// state is what schedule.Due needs to know of volume k. Callers hold w.mu.
func (w *Engine) state(k part.Key) schedule.State {
	var s schedule.State
	if rec := w.volumes[k]; rec != nil {
		s = rec.State
	}
	_, s.InFlight = w.running[k]
	return s
}

// readMarks reads the mark of each pod of pods that has a part a walk measures, keyed by UID;
// a pod without one is missing, and counted by reason. A pod whose RuntimeClass is not one
// whose writes its cgroup carries (carriedBy) has none: its marks would stay equal while its
// sandbox writes.
func (w *Engine) readMarks(pods []part.Pod) map[string]change.Mark {
	if w.cfg.Signal == nil {
		return nil
	}
	marks := make(map[string]change.Mark, len(pods))
	for _, p := range pods {
		if !walksSomething(p) {
			continue
		}
		if !w.carriedBy[p.RuntimeClass] {
			w.metrics.noteMark(change.MarkRuntimeClass, fmt.Errorf("pod %s/%s runs under RuntimeClass %q, not one whose writes its cgroup carries (--collection.change-signal.runtime-classes)", p.Namespace, p.Pod, p.RuntimeClass))
			continue
		}
		m, err := w.cfg.Signal.Mark(p)
		if err != nil {
			reason := change.MarkUnknown
			if se := (*change.Error)(nil); errors.As(err, &se) {
				reason = se.Reason
			}
			w.metrics.noteMark(reason, err)
			continue
		}
		w.metrics.noteMark(change.MarkRead, nil)
		marks[p.UID] = m
	}
	return marks
}

// walksSomething reports whether a part of p is measured by a walk, not a few stats.
func walksSomething(p part.Pod) bool {
	for _, v := range p.Parts {
		if !v.Kind.Cheap() {
			return true
		}
	}
	return false
}
