package journal

import (
	"context"
	"fmt"
	"time"

	"github.com/wsstore/wsstore/wserr"
)

// DefaultPoll is how often Follow polls when its poll interval is 0.
const DefaultPoll = 500 * time.Millisecond

// Follow calls fn, in seq order, for every event of runID after afterSeq:
// first those already journaled, then each new one as it is committed. It
// polls with Page every poll interval (0 means DefaultPoll) and reads
// without pausing while it is catching up, so a long backlog is delivered
// at full speed. Pass afterSeq = Last() to see only new events.
//
// Follow returns when ctx is done, with ctx.Err(); when fn returns an
// error, with that error unchanged; or when a read fails. An empty runID, a
// negative afterSeq or poll, or a nil fn fails with
// workspace.invalid_argument.
//
// Follow knows nothing of run status: it is the caller's fn (seeing
// run_completed, run_failed or run_cancelled, say; a run's end is one of
// them; the store journals no run_finished) or
// ctx that ends it, or FollowWhile's alive. If the
// run is deleted and its id reused, Follow stays silent until the new
// journal passes afterSeq.
func (j *Journal) Follow(ctx context.Context, runID string, afterSeq int64, poll time.Duration, fn func(Event) error) error {
	return j.FollowWhile(ctx, runID, afterSeq, poll, nil, fn)
}

// FollowWhile is Follow that also calls alive (if not nil) after every
// poll that found nothing new, and returns its error unchanged when it
// returns one: the caller says there, from what it owns (the run's row),
// whether anything more can come, such as a run that was deleted.
func (j *Journal) FollowWhile(ctx context.Context, runID string, afterSeq int64, poll time.Duration, alive func(context.Context) error, fn func(Event) error) error {
	const op = "journal follow"
	switch {
	case runID == "":
		return wserr.New(wserr.InvalidArgument, op, "", "empty run id")
	case afterSeq < 0:
		return wserr.New(wserr.InvalidArgument, op, "", "after seq %d is negative", afterSeq)
	case poll < 0:
		return wserr.New(wserr.InvalidArgument, op, "", "poll interval %s is negative", poll)
	case fn == nil:
		return wserr.New(wserr.InvalidArgument, op, "", "nil callback")
	}
	if poll == 0 {
		poll = DefaultPoll
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
		}
		full, found := true, false
		for full {
			page, err := j.Page(ctx, runID, PageQuery{AfterSeq: afterSeq, Limit: MaxLimit})
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return fmt.Errorf("%s: %w", op, err)
			}
			for _, e := range page {
				if err := fn(e); err != nil {
					return err
				}
				afterSeq = e.Seq
			}
			// A page may end short of MaxLimit at MaxPageBytes: only
			// an empty one says the journal is caught up.
			full, found = len(page) > 0, found || len(page) > 0
		}
		if !found && alive != nil {
			if err := alive(ctx); err != nil {
				return err
			}
		}
		timer.Reset(poll)
	}
}
