// Package exportertest holds the fakes of package exporter's contracts for the tests of the
// packages that use it (exporter's own external tests, the remediator's contract test, the
// benchmarks): one fake PodLister (Pods), one fake Source (Source, and its Measurer view)
// and one fake clock (Clock). A test varies them with small named variations (a MeasureFunc
// such as Answer, Table or Through; a Before hook such as a Gate's; Cost), not with a fake of
// its own, so that a new field of the contract is edited in one place.
package exportertest

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/emptydir-guard/emptydir-guard/exporter/live"
	"github.com/emptydir-guard/emptydir-guard/exporter/part"
)

// Pods is a fake exporter.PodLister: an informer cache holding pods, synced unless Unsynced
// says otherwise. List returns them sorted by namespace and name. Safe for concurrent use.
type Pods struct {
	mu     sync.Mutex
	pods   []part.Pod
	synced bool
}

// NewPods returns a synced cache holding pods.
func NewPods(pods ...part.Pod) *Pods {
	return &Pods{pods: append([]part.Pod(nil), pods...), synced: true}
}

// Unsynced makes the cache one whose informer has not synced yet, and returns it.
func (p *Pods) Unsynced() *Pods {
	p.SetSynced(false)
	return p
}

// Set replaces the cache's pods: pods created, changed or deleted since.
func (p *Pods) Set(pods ...part.Pod) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pods = append([]part.Pod(nil), pods...)
}

// SetSynced says whether the informer has synced.
func (p *Pods) SetSynced(synced bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.synced = synced
}

// List implements exporter.PodLister.
func (p *Pods) List() ([]part.Pod, error) {
	p.mu.Lock()
	out := append([]part.Pod(nil), p.pods...)
	p.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Pod < out[j].Pod
	})
	return out, nil
}

// Get implements exporter.PodLister.
func (p *Pods) Get(namespace, name string) (part.Pod, bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pv := range p.pods {
		if pv.Namespace == namespace && pv.Pod == name {
			return pv, true, nil
		}
	}
	return part.Pod{}, false, nil
}

// HasSynced implements exporter.PodLister.
func (p *Pods) HasSynced() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.synced
}

// MeasureFunc answers for one volume of one pod.
type MeasureFunc func(ctx context.Context, pod part.Pod, v part.Part) (part.Measurement, error)

// Answer is a MeasureFunc that answers m, or err, for every volume.
func Answer(m part.Measurement, err error) MeasureFunc {
	return func(context.Context, part.Pod, part.Part) (part.Measurement, error) {
		return m, err
	}
}

// Through is a MeasureFunc that measures with a real source, unmetered, so that a Source over
// it counts (Calls) or records (Take) the requests reaching that source.
func Through(src part.Measurer) MeasureFunc {
	return func(ctx context.Context, p part.Pod, v part.Part) (part.Measurement, error) {
		return src.MeasurePart(ctx, p, v, nil)
	}
}

// Source is a fake exporter.Source that measures a whole request at once, as the kubelet's
// source does (it is no Measurer; Measurer gives one): each volume answers what its
// MeasureFunc says, after the Before hook, when set, has seen the request. Like a real walk,
// a volume whose request's context ends before it answers fails with the context's error
// (reason timeout for a deadline), whatever the MeasureFunc says. Safe for concurrent use.
type Source struct {
	measure MeasureFunc
	before  func(ctx context.Context, pods []part.Pod)
	cost    func(part.Pod, part.Part) time.Duration

	mu    sync.Mutex
	calls int
	seen  []part.Pod
}

// NewSource returns a Source whose volumes answer measure.
func NewSource(measure MeasureFunc) *Source { return &Source{measure: measure} }

// Before sets a hook that sees each request before it is measured (to record it, or hold it
// until the test releases it: Gate), and returns s. A walk of the Measurer view is a
// request of its pod with the walked volume alone.
func (s *Source) Before(hook func(ctx context.Context, pods []part.Pod)) *Source {
	s.before = hook
	return s
}

// Cost makes each walk of the Measurer view charge d of CPU time to the walk's meter, as
// its threads would, for the collection's CPU budget and the live ones: in steps of costStep,
// stopping when the walk's context ends, so that a live walk cut by its budget (live.ErrCut)
// overdraws it by a step at most; and returns s.
func (s *Source) Cost(d time.Duration) *Source {
	return s.Costs(func(part.Pod, part.Part) time.Duration { return d })
}

// Costs is Cost with each walk's cost what cost says for its pod and volume (a tenant's
// costly volume beside cheap ones); and returns s.
func (s *Source) Costs(cost func(part.Pod, part.Part) time.Duration) *Source {
	s.cost = cost
	return s
}

// Calls is how many requests have reached s: Measure calls and walks.
func (s *Source) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// Take returns the pods of the requests that reached s since the last Take, in order (a
// walk's pod with the walked volume alone).
func (s *Source) Take() []part.Pod {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.seen
	s.seen = nil
	return out
}

// Name implements exporter.Source: the filesystem source's, whose errors the tests expect.
func (s *Source) Name() string { return "filesystem" }

// Measure implements exporter.Source.
func (s *Source) Measure(ctx context.Context, pods []part.Pod) []part.Result {
	s.request(ctx, pods)
	var out []part.Result
	for _, p := range pods {
		for _, v := range p.Parts {
			r := part.Result{Namespace: p.Namespace, Pod: p.Pod, UID: p.UID, Part: v}
			r.Measurement, r.Err = s.answer(ctx, p, v)
			out = append(out, r)
		}
	}
	return out
}

// request counts and records a request, then lets the Before hook see it.
func (s *Source) request(ctx context.Context, pods []part.Pod) {
	s.mu.Lock()
	s.calls++
	s.seen = append(s.seen, pods...)
	s.mu.Unlock()
	if s.before != nil {
		s.before(ctx, pods)
	}
}

// answer is what volume v of pod p answers, the context's error once ctx has ended.
func (s *Source) answer(ctx context.Context, p part.Pod, v part.Part) (part.Measurement, error) {
	m, err := s.measure(ctx, p, v)
	if ctx.Err() != nil {
		return part.Measurement{}, contextError(ctx.Err())
	}
	return m, err
}

// contextError is the error of a walk its context ended, as source.Filesystem classifies it.
func contextError(err error) error {
	reason := part.ReasonIO
	if errors.Is(err, context.DeadlineExceeded) {
		reason = part.ReasonTimeout
	}
	return &part.MeasureError{Reason: reason, Err: err}
}

// Measurer is a Source as an part.Measurer, as the filesystem source is: the
// collection walks each of its volumes on its own, in the background, bounded in time and
// by the CPU budget. Its Measure, which the live endpoint calls, is the Source's.
type Measurer struct{ *Source }

// Measurer returns s as an part.Measurer.
func (s *Source) Measurer() *Measurer { return &Measurer{s} }

// costStep is how much of Cost a walk charges at a time, as a walk's threads charge their
// meter every few dozen directories.
const costStep = 100 * time.Millisecond

// MeasurePart implements part.Measurer: one request of pod p with volume v alone,
// charged Cost. A walk its budget cut before it was charged all of it (the context's cause
// live.ErrCut) answers what the MeasureFunc says, CutShort, as a real walk cut short answers
// what it counted until then.
func (s *Measurer) MeasurePart(ctx context.Context, p part.Pod, v part.Part, meter part.Meter) (part.Measurement, error) {
	one := p
	one.Parts = []part.Part{v}
	var left time.Duration
	if s.cost != nil {
		left = s.cost(p, v)
	}
	for ; meter != nil && left > 0 && ctx.Err() == nil; left -= costStep {
		meter.Add(min(left, costStep))
	}
	s.request(ctx, []part.Pod{one})
	if left > 0 && meter != nil && errors.Is(context.Cause(ctx), live.ErrCut) {
		m, err := s.measure(ctx, p, v)
		m.CutShort = err == nil
		return m, err
	}
	return s.answer(ctx, p, v)
}
