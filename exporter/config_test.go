package exporter

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emptydir-guard/emptydir-guard/internal/fswalk"
)

// testConfig is cfg with the settings it leaves zero that New refuses taken from
// DefaultConfig (Interval, VolumeConcurrency, VolumeTimeout, LiveConcurrency, LiveMaxWait).
// What a zero means on its own (no slow cadence, no CPU budget, no alignment) stays off,
// so that a test turns on only what it is about.
func testConfig(cfg Config) Config {
	d := DefaultConfig()
	pick := func(v *time.Duration, def time.Duration) {
		if *v == 0 {
			*v = def
		}
	}
	pick(&cfg.Interval, d.Interval)
	pick(&cfg.VolumeTimeout, d.VolumeTimeout)
	pick(&cfg.LiveMaxWait, d.LiveMaxWait)
	if cfg.VolumeConcurrency == 0 {
		cfg.VolumeConcurrency = d.VolumeConcurrency
	}
	if cfg.LiveConcurrency == 0 {
		cfg.LiveConcurrency = d.LiveConcurrency
	}
	return cfg
}

// TestDefaultConfig: the defaults pass Validate with the filesystem source's defaults, and New
// refuses the zero settings it would otherwise have to replace by defaults of its own.
func TestDefaultConfig(t *testing.T) {
	cfg := DefaultConfig()
	fs := DefaultFilesystemSource()
	cfg.NodeName, cfg.Source, cfg.Pods = "node-1", &fs, &collPods{}
	if err := cfg.Validate(); err != nil {
		t.Errorf("DefaultConfig: %v", err)
	}
	if _, err := New(cfg); err != nil {
		t.Errorf("New(DefaultConfig()): %v", err)
	}
	if _, err := New(Config{NodeName: "node-1", Source: &fs, Pods: &collPods{}}); err == nil {
		t.Error("New accepted a Config whose concurrencies, interval and timeouts are zero")
	}
}

// blockingSource is a VolumeSource whose walks go on after their context has ended, until
// released: a walk in a system call that has not seen the cancellation yet.
type blockingSource struct {
	started chan struct{} // receives one value per walk started
	release chan struct{}
	ended   atomic.Int32
}

func (s *blockingSource) Name() string { return "filesystem" }

func (s *blockingSource) Measure(ctx context.Context, pods []PodVolumes) []VolumeResult {
	return measureEach(ctx, pods, s.MeasureVolume)
}

func (s *blockingSource) MeasureVolume(ctx context.Context, _ PodVolumes, _ Volume, _ *fswalk.CPUMeter) (Measurement, error) {
	s.started <- struct{}{}
	<-ctx.Done()
	<-s.release
	s.ended.Add(1)
	return Measurement{}, fsError(ctx.Err())
}

// TestRunWaitsForWalks: once its context has ended, Run returns only after the walks it
// started have ended, so that shutdown leaves no walk behind.
func TestRunWaitsForWalks(t *testing.T) {
	src := &blockingSource{started: make(chan struct{}, 2), release: make(chan struct{})}
	pods := &collPods{synced: true, pods: []PodVolumes{{Namespace: "big", Pod: "hoarder", UID: "uid-1",
		Volumes: []Volume{{Name: "a", Medium: MediumDisk, LimitBytes: limit(1)}, {Name: "b", Medium: MediumDisk}}}}}
	e, err := New(testConfig(Config{NodeName: "node-1", Source: src, Pods: pods, Interval: time.Hour}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.Run(ctx); close(done) }()
	<-src.started
	<-src.started
	cancel()
	// The pause gives a Run that does not wait the time to return first; it asserts nothing.
	time.AfterFunc(100*time.Millisecond, func() { close(src.release) })
	<-done
	if got := src.ended.Load(); got != 2 {
		t.Errorf("Run returned with %d of its 2 walks ended", got)
	}
}
