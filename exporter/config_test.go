package exporter_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emptydir-guard/emptydir-guard/exporter"
	"github.com/emptydir-guard/emptydir-guard/exporter/exportertest"
	"github.com/emptydir-guard/emptydir-guard/exporter/part"
	"github.com/emptydir-guard/emptydir-guard/exporter/source"
)

// TestDefaultConfig: the defaults pass Validate with the filesystem source's defaults, and New
// refuses the zero settings it would otherwise have to replace by defaults of its own.
func TestDefaultConfig(t *testing.T) {
	cfg := exporter.DefaultConfig()
	fs := source.DefaultFilesystem()
	cfg.NodeName, cfg.Source, cfg.Pods = "node-1", &fs, exportertest.NewPods().Unsynced()
	if err := cfg.Validate(); err != nil {
		t.Errorf("DefaultConfig: %v", err)
	}
	if _, err := exporter.New(cfg); err != nil {
		t.Errorf("New(DefaultConfig()): %v", err)
	}
	if _, err := exporter.New(exporter.Config{NodeName: "node-1", Source: &fs, Pods: exportertest.NewPods().Unsynced()}); err == nil {
		t.Error("New accepted a Config whose concurrencies, interval and timeouts are zero")
	}
}

// TestRunWaitsForWalks: once its context has ended, Run returns only after the walks it
// started have ended, so that shutdown leaves no walk behind.
func TestRunWaitsForWalks(t *testing.T) {
	// The walks go on after their context has ended, until released: a walk in a system call
	// that has not seen the cancellation yet.
	gate := exportertest.NewGate()
	var ended atomic.Int32
	src := exportertest.NewSource(func(context.Context, part.Pod, part.Part) (part.Measurement, error) {
		ended.Add(1)
		return part.Measurement{}, nil
	}).Before(gate.HoldPastContext).Measurer()
	pods := exportertest.NewPods(part.Pod{Namespace: "big", Pod: "hoarder", UID: "uid-1",
		Parts: []part.Part{{Name: "a", Medium: part.MediumDisk, LimitBytes: limit(1)}, {Name: "b", Medium: part.MediumDisk}}})
	e, err := exporter.New(exporter.TestConfig(exporter.Config{NodeName: "node-1", Source: src, Pods: pods, Interval: time.Hour}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.Run(ctx); close(done) }()
	<-gate.Started()
	<-gate.Started()
	cancel()
	// The pause gives a Run that does not wait the time to return first; it asserts nothing.
	time.AfterFunc(100*time.Millisecond, gate.Open)
	<-done
	if got := ended.Load(); got != 2 {
		t.Errorf("Run returned with %d of its 2 walks ended", got)
	}
}
