package exportertest

import (
	"sync"
	"time"
)

// Clock is a fake of the exporter's clock (Config.Now, source.Filesystem.Now) that the test
// moves on; safe to read from walks in flight.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock showing t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now is the clock's time: pass it as Config.Now.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Add moves the clock on by d.
func (c *Clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
