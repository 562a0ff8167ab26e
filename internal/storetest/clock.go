package storetest

import (
	"sync"
	"time"
)

// Epoch is the time a NewClock starts at: a fixed date, so the times a
// test's rows and events get are known.
var Epoch = time.Date(2026, 4, 26, 0, 0, 0, 0, time.UTC)

// Clock is a fake clock to inject as a store's one clock (wsstore.Options
// Now). Each reading moves it on by its step before returning, so with a
// step every row and event gets a distinct, increasing time; with none it
// moves only when Set or Advance moves it. It is safe for concurrent use.
type Clock struct {
	mu   sync.Mutex
	t    time.Time
	step time.Duration
}

// NewClock returns a clock at Epoch that moves one millisecond per
// reading.
func NewClock() *Clock { return NewClockAt(Epoch, time.Millisecond) }

// NewClockAt returns a clock at t that moves step per reading (0: only
// when told).
func NewClockAt(t time.Time, step time.Duration) *Clock { return &Clock{t: t, step: step} }

// Now moves the clock on by its step and returns the time it shows.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(c.step)
	return c.t
}

// Set puts the clock at t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
