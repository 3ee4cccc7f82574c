// Package exportertest holds the fakes of package exporter's contracts for the tests of the
// packages that use it (exporter's own external tests, the remediator's contract test, the
// benchmarks): one fake PodLister and one fake Source, built with small named variations,
// so that a new field of the contract is edited in one place.
package exportertest

import (
	"context"
	"sort"
	"sync"

	"github.com/emptydir-guard/emptydir-guard/exporter"
)

// Pods is a fake exporter.PodLister: an informer cache holding pods, synced unless Unsynced
// says otherwise. List returns them sorted by namespace and name. Safe for concurrent use.
type Pods struct {
	mu     sync.Mutex
	pods   []exporter.PodVolumes
	synced bool
}

// NewPods returns a synced cache holding pods.
func NewPods(pods ...exporter.PodVolumes) *Pods {
	return &Pods{pods: append([]exporter.PodVolumes(nil), pods...), synced: true}
}

// Unsynced makes the cache one whose informer has not synced yet, and returns it.
func (p *Pods) Unsynced() *Pods {
	p.SetSynced(false)
	return p
}

// SetSynced says whether the informer has synced.
func (p *Pods) SetSynced(synced bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.synced = synced
}

// List implements exporter.PodLister.
func (p *Pods) List() ([]exporter.PodVolumes, error) {
	p.mu.Lock()
	out := append([]exporter.PodVolumes(nil), p.pods...)
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
func (p *Pods) Get(namespace, name string) (exporter.PodVolumes, bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pv := range p.pods {
		if pv.Namespace == namespace && pv.Pod == name {
			return pv, true, nil
		}
	}
	return exporter.PodVolumes{}, false, nil
}

// HasSynced implements exporter.PodLister.
func (p *Pods) HasSynced() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.synced
}

// MeasureFunc answers for one volume of one pod.
type MeasureFunc func(ctx context.Context, pod exporter.PodVolumes, v exporter.Volume) (exporter.Measurement, error)

// Answer is a MeasureFunc that answers m, or err, for every volume.
func Answer(m exporter.Measurement, err error) MeasureFunc {
	return func(context.Context, exporter.PodVolumes, exporter.Volume) (exporter.Measurement, error) {
		return m, err
	}
}

// Source is a fake exporter.Source that measures a whole request at once, as the kubelet's
// source does (it is no VolumeSource): each volume answers what its MeasureFunc says, after
// the Before hook, when set, has seen the request.
type Source struct {
	measure MeasureFunc
	before  func(ctx context.Context, pods []exporter.PodVolumes)
}

// NewSource returns a Source whose volumes answer measure.
func NewSource(measure MeasureFunc) *Source { return &Source{measure: measure} }

// Before sets a hook that sees each request before it is measured (to record it, or hold it
// until the test releases it), and returns s.
func (s *Source) Before(hook func(ctx context.Context, pods []exporter.PodVolumes)) *Source {
	s.before = hook
	return s
}

// Name implements exporter.Source: the filesystem source's, whose errors the tests expect.
func (s *Source) Name() string { return "filesystem" }

// Measure implements exporter.Source.
func (s *Source) Measure(ctx context.Context, pods []exporter.PodVolumes) []exporter.VolumeResult {
	if s.before != nil {
		s.before(ctx, pods)
	}
	var out []exporter.VolumeResult
	for _, p := range pods {
		for _, v := range p.Volumes {
			r := exporter.VolumeResult{Namespace: p.Namespace, Pod: p.Pod, UID: p.UID, Volume: v}
			r.Measurement, r.Err = s.measure(ctx, p, v)
			out = append(out, r)
		}
	}
	return out
}
