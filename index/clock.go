package index

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/wsstore/wsstore/wserr"
)

// The times a store holds: it keeps them as int64 nanoseconds since 1970.
var (
	minTime = time.Unix(0, math.MinInt64)
	maxTime = time.Unix(0, math.MaxInt64)
)

// TimeInRange reports whether t is a time a store can hold, from
// 1677-09-21 to 2262-04-11: outside it, t.UnixNano wraps around.
func TimeInRange(t time.Time) bool { return !t.Before(minTime) && !t.After(maxTime) }

// Clock is a store's clock, checked: Now notes whether its reading is a
// time the store can hold, and while the last reading is not, every
// write transaction of a DB the clock is set on (SetClock) fails with
// store.invalid_options and changes nothing, so no time stamped from it
// is stored wrapped around.
type Clock struct {
	now func() time.Time
	bad atomic.Pointer[time.Time] // the last reading, when out of range
}

// NewClock returns now, checked.
func NewClock(now func() time.Time) *Clock { return &Clock{now: now} }

// Now reads the clock.
func (c *Clock) Now() time.Time {
	t := c.now()
	switch {
	case !TimeInRange(t):
		c.bad.Store(&t)
	case c.bad.Load() != nil:
		c.bad.Store(nil)
	}
	return t
}

// Err is the error of a write while the clock's last reading is out of
// range, else nil.
func (c *Clock) Err() error {
	t := c.bad.Load()
	if t == nil {
		return nil
	}
	return wserr.New(wserr.InvalidOptions, "clock", "", "the store's clock reads %s, outside the times a store holds (%s to %s): nothing was written; set the clock right", t.UTC().Format(time.RFC3339), minTime.UTC().Format(time.DateOnly), maxTime.UTC().Format(time.DateOnly))
}

// SetClock makes db refuse every write transaction while c's last
// reading is out of range (Clock). Set it once, before the first write
// that stamps a time.
func (db *DB) SetClock(c *Clock) { db.clock = c }
