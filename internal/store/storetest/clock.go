package storetest

import (
	"sync"
	"time"
)

// FakeClock is a manual clock. It is safe for concurrent use; time moves only through Advance.
type FakeClock struct {
	mu  sync.Mutex // guards now
	now time.Time
}

// NewFakeClock returns a clock reading start.
func NewFakeClock(start time.Time) *FakeClock {
	return &FakeClock{now: start}
}

// Now returns the clock's current time. Pass the method value (c.Now) to a Factory.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
