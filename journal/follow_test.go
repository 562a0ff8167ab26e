package journal_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/journal"
	"github.com/wsstore/wsstore/wserr"
)

// failsafe bounds how long a test waits for an event that should come
// within a few polls; it guards against a hang and is never the expected
// path.
const failsafe = 10 * time.Second

func TestFollow(t *testing.T) {
	t.Run("OKDeliversBacklogThenNewEventsInOrder", func(t *testing.T) {
		db, j, _ := newJournal(t)
		appendMany(t, db, j, "run_a", 3)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()

		got := make(chan journal.Event, 100)
		done := make(chan error, 1)
		go func() {
			done <- j.Follow(ctx, "run_a", 0, time.Millisecond, func(e journal.Event) error {
				got <- e
				return nil
			})
		}()

		receive := func(n int) []int64 {
			var out []int64
			for range n {
				select {
				case e := <-got:
					out = append(out, e.Seq)
				case <-time.After(failsafe):
					t.Fatalf("no event after %s", failsafe)
				}
			}
			return out
		}
		assert.Equal(t, seqRange(1, 3), receive(3))

		// Appended after Follow started, some while it is between polls,
		// one in another run it must not deliver.
		appendMany(t, db, j, "run_b", 2)
		appendOne(t, db, j, "run_a", journal.ToolCallRequested, nil)
		appendMany(t, db, j, "run_a", 4)
		assert.Equal(t, seqRange(4, 8), receive(5))

		cancel()
		select {
		case err := <-done:
			assert.ErrorIs(t, err, context.Canceled)
		case <-time.After(failsafe):
			t.Fatalf("Follow did not return after cancel")
		}
		assert.Empty(t, got, "nothing beyond the run's events")
	})

	t.Run("OKLongBacklogAcrossPages", func(t *testing.T) {
		db, j, _ := newJournal(t)
		appendMany(t, db, j, "run_a", journal.MaxLimit+20)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var seen []int64
		err := j.Follow(ctx, "run_a", 10, time.Hour, func(e journal.Event) error {
			seen = append(seen, e.Seq)
			if e.Seq == journal.MaxLimit+20 {
				cancel()
			}
			return nil
		})
		assert.ErrorIs(t, err, context.Canceled)
		// The poll interval is an hour: the whole backlog came without
		// waiting for a second poll.
		assert.Equal(t, seqRange(11, journal.MaxLimit+20), seen)
	})

	t.Run("OKCallbackErrorStopsFollow", func(t *testing.T) {
		db, j, _ := newJournal(t)
		appendMany(t, db, j, "run_a", 5)
		errStop := errors.New("stop")
		var seen []int64
		err := j.Follow(context.Background(), "run_a", 0, time.Millisecond, func(e journal.Event) error {
			seen = append(seen, e.Seq)
			if e.Seq == 2 {
				return errStop
			}
			return nil
		})
		assert.ErrorIs(t, err, errStop)
		assert.Equal(t, []int64{1, 2}, seen)
	})

	t.Run("OKAlreadyCancelled", func(t *testing.T) {
		db, j, _ := newJournal(t)
		appendMany(t, db, j, "run_a", 1)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		err := j.Follow(ctx, "run_a", 0, 0, func(journal.Event) error {
			t.Error("no event after cancel")
			return nil
		})
		assert.ErrorIs(t, err, context.Canceled)
	})

	_, j, _ := newJournal(t)
	noop := func(journal.Event) error { return nil }
	errTests := []struct {
		name  string
		runID string
		after int64
		poll  time.Duration
		fn    func(journal.Event) error
	}{
		{"ErrEmptyRunID", "", 0, time.Millisecond, noop},
		{"ErrNegativeAfter", "run_a", -1, time.Millisecond, noop},
		{"ErrNegativePoll", "run_a", 0, -time.Millisecond, noop},
		{"ErrNilCallback", "run_a", 0, time.Millisecond, nil},
	}
	for _, tt := range errTests {
		t.Run(tt.name, func(t *testing.T) {
			err := j.Follow(context.Background(), tt.runID, tt.after, tt.poll, tt.fn)
			require.Error(t, err)
			assert.Equal(t, wserr.InvalidArgument, wserr.CodeOf(err), "%v", err)
		})
	}
}
