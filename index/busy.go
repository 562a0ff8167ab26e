package index

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/wsstore/wsstore/wserr"
)

// writeAttempt is how long one attempt at the write lock waits in SQLite's
// own busy handler. SQLite's handler sleeps up to 100 ms between polls, so
// a writer that waits in it alone loses the lock again and again to
// processes that poll sooner; short attempts retried with a jittered
// backoff queue writers more fairly.
const writeAttempt = 50 * time.Millisecond

// noWait marks a context whose writes try the write lock once.
type noWait struct{}

// WithoutWaiting returns ctx for work that may as well be left for later
// (what a Close finishes for the next open): a write under it makes one
// attempt at the write lock (50 ms) and fails with store.busy if another
// process holds it, where a write otherwise waits up to
// Options.BusyTimeout.
func WithoutWaiting(ctx context.Context) context.Context {
	return context.WithValue(ctx, noWait{}, true)
}

// whileBusy calls try until it returns something other than store.busy,
// sleeping a jittered, growing delay (up to 20 ms) between calls, and
// gives up with try's store.busy once the busy timeout has passed since
// the first call (after the first call under WithoutWaiting), or with
// store.canceled once ctx ends.
func (db *DB) whileBusy(ctx context.Context, try func() error) error {
	deadline := time.Now().Add(db.opts.BusyTimeout)
	if ctx.Value(noWait{}) != nil {
		deadline = time.Time{}
	}
	for delay := time.Millisecond; ; delay = min(2*delay, 20*time.Millisecond) {
		err := try()
		if err == nil || !wserr.Is(err, wserr.Busy) || !time.Now().Before(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return Translate(ctx.Err())
		case <-time.After(delay/2 + rand.N(delay)):
		}
	}
}
