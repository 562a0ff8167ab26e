package replica

import (
	"log/slog"
	"time"
)

// maxBackoff is the longest a Backoff waits between two tries while they
// fail (an interval longer than it is waited for as it is).
const maxBackoff = time.Minute

// Backoff paces the tries of a loop that runs every Interval while they
// fail, and logs them, as Litestream's own monitor does: the next try is
// due an interval after the first failure, twice as long after each next
// one, up to a minute; after a success, at once. Each failure is logged
// to Logger as a warning "WHAT failed" with tries (the failed tries in a
// row), retry_in and the error; the success after them as "WHAT resumed"
// with failed_tries. The Replicator's own loop keeps one ("sync");
// wsctl replicate's rounds keep another ("round"). A Backoff is not safe
// for concurrent use.
type Backoff struct {
	What     string
	Interval time.Duration
	Logger   *slog.Logger
	failed   int           // failed tries in a row
	wait     time.Duration // the wait after the last failed try
	retryAt  time.Time     // when a try is due after a failure
}

// Due reports whether a try is due at now.
func (b *Backoff) Due(now time.Time) bool { return b.failed == 0 || !now.Before(b.retryAt) }

// Done records the outcome of a try made at now, err nil for a success,
// and logs it; attrs are added to the line.
func (b *Backoff) Done(now time.Time, err error, attrs ...any) {
	switch {
	case err != nil:
		b.failed++
		if b.wait == 0 {
			b.wait = b.Interval
		} else {
			b.wait = min(2*b.wait, max(maxBackoff, b.Interval))
		}
		b.retryAt = now.Add(b.wait)
		b.Logger.Warn(b.What+" failed", append(attrs, "tries", b.failed, "retry_in", b.wait, "error", err)...)
	case b.failed > 0:
		b.Logger.Info(b.What+" resumed", append(attrs, "failed_tries", b.failed)...)
		b.failed, b.wait = 0, 0
	}
}

// Hurry makes the next try due at once: something else reached what the
// tries do. The failures stay counted until a try succeeds.
func (b *Backoff) Hurry() { b.retryAt = time.Time{} }
