package remediator

import (
	"sync"
	"time"
)

// maxCachedMeasurements bounds the measurement cache; a burst of alerts for more volumes
// than this within the maximum age simply measures the rest again.
const maxCachedMeasurements = 4096

// measurementCache keeps the last live measurement per pod UID and subject while it is fresh
// enough to act on (the same rule as a new one: checkFresh with the maximum age). A refused
// eviction (PodDisruptionBudget, throttling) makes Alertmanager retry within seconds; those
// retries reuse the measurement instead of walking a big volume again each time.
type measurementCache struct {
	mu      sync.Mutex
	maxAge  time.Duration
	entries map[measurementKey]Measurement
}

type measurementKey struct {
	uid     string
	subject Subject
}

func newMeasurementCache(maxAge time.Duration) *measurementCache {
	return &measurementCache{maxAge: maxAge, entries: map[measurementKey]Measurement{}}
}

// get returns the cached measurement of the subject of the pod with uid if it is still fresh.
func (c *measurementCache) get(uid string, subject Subject, now time.Time) (Measurement, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := measurementKey{uid, subject}
	m, ok := c.entries[k]
	if !ok {
		return Measurement{}, false
	}
	if checkFresh(m.MeasuredAt, now, c.maxAge) != nil {
		delete(c.entries, k)
		return Measurement{}, false
	}
	return m, true
}

// forget drops the measurement of the subject of the pod with uid.
func (c *measurementCache) forget(uid string, subject Subject) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, measurementKey{uid, subject})
}

// put remembers m, first dropping every entry that is no longer fresh.
func (c *measurementCache) put(uid string, subject Subject, m Measurement, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, old := range c.entries {
		if checkFresh(old.MeasuredAt, now, c.maxAge) != nil {
			delete(c.entries, k)
		}
	}
	if len(c.entries) >= maxCachedMeasurements {
		return
	}
	c.entries[measurementKey{uid, subject}] = m
}
