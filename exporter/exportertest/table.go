package exportertest

import (
	"context"
	"sync"

	"github.com/emptydir-guard/emptydir-guard/exporter/part"
)

// Table answers each volume, keyed by its pod's UID and its name, from a table the test fills
// and edits between cycles: its measurement, or the error Fail gave it; a volume not in it
// answers a zero Measurement. Its Measure method is the MeasureFunc. Safe for concurrent use.
type Table struct {
	mu       sync.Mutex
	measured map[tableKey]part.Measurement
	failing  map[tableKey]error
}

type tableKey struct{ uid, volume string }

// NewTable returns an empty table.
func NewTable() *Table {
	return &Table{measured: map[tableKey]part.Measurement{}, failing: map[tableKey]error{}}
}

// Set makes the volume answer m (unless it fails).
func (t *Table) Set(uid, volume string, m part.Measurement) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.measured[tableKey{uid, volume}] = m
}

// Get returns what Set gave the volume.
func (t *Table) Get(uid, volume string) part.Measurement {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.measured[tableKey{uid, volume}]
}

// Edit changes every measurement the table holds with edit.
func (t *Table) Edit(edit func(uid, volume string, m *part.Measurement)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, m := range t.measured {
		edit(k.uid, k.volume, &m)
		t.measured[k] = m
	}
}

// Fail makes the volume answer err, as a source reports per volume; nil: its measurement again.
func (t *Table) Fail(uid, volume string, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err == nil {
		delete(t.failing, tableKey{uid, volume})
		return
	}
	t.failing[tableKey{uid, volume}] = err
}

// Reset empties the table.
func (t *Table) Reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	clear(t.measured)
	clear(t.failing)
}

// Measure is the table as a MeasureFunc.
func (t *Table) Measure(_ context.Context, p part.Pod, v part.Part) (part.Measurement, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := tableKey{p.UID, v.Name}
	if err := t.failing[k]; err != nil {
		return part.Measurement{}, err
	}
	return t.measured[k], nil
}
