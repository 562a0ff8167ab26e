package runs_test

import (
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/journal"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/wserr"
)

// TestCommitSavesOneAtATimePerChatConcurrent commits from several runs of
// one chat at once: the chat sink is never called for that chat while
// another call is in flight; a commit that finds the chat's turn taken
// fails with store.busy and records nothing, and succeeds when retried.
func TestCommitSavesOneAtATimePerChatConcurrent(t *testing.T) {
	e := newLifecycleEnv(t)
	const n = 6
	var ids []string
	for range n {
		r := e.create("c1", runs.CreateRequest{})
		e.write(r.ID, "output/main.md", "body of "+r.ID)
		ids = append(ids, r.ID)
	}
	var inFlight, most atomic.Int32
	sink := runs.SinkFunc(func(ctx context.Context, req runs.CommitRequest) (json.RawMessage, error) {
		now := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			m := most.Load()
			if now <= m || most.CompareAndSwap(m, now) {
				break
			}
		}
		time.Sleep(2 * time.Millisecond) // widen the window an overlap would need
		return nil, nil
	})
	var wg sync.WaitGroup
	busy := make([]int, n)
	errs := make([]error, n)
	for i, id := range ids {
		wg.Go(func() {
			for {
				_, err := e.svc.Commit(e.ctx, id, sink, runs.CommitOptions{})
				if !wserr.Is(err, wserr.Busy) {
					errs[i] = err
					return
				}
				busy[i]++
				runtime.Gosched()
			}
		})
	}
	wg.Wait()
	for i, id := range ids {
		require.NoError(t, errs[i], id)
		commits, err := e.svc.Commits(e.ctx, id)
		require.NoError(t, err)
		require.Len(t, commits, 1, "a busy commit records nothing")
		assert.Equal(t, runs.CommitCompleted, commits[0].Status)
	}
	assert.Equal(t, int32(1), most.Load(), "one save at a time for a chat")
	t.Logf("commits found the chat busy %v times", busy)
}

// TestCommitSavesOfOtherChatsDoNotWait: a save in flight for one chat does
// not hold up another chat's, and a commit to the busy chat, here from
// the sink itself, fails at once with store.busy rather than wait for a
// turn its own caller holds.
func TestCommitSavesOfOtherChatsDoNotWait(t *testing.T) {
	e := newLifecycleEnv(t)
	a := e.create("chat-a", runs.CreateRequest{})
	b := e.create("chat-b", runs.CreateRequest{})
	a2 := e.create("chat-a", runs.CreateRequest{})
	for _, r := range []runs.Run{a, b, a2} {
		e.write(r.ID, "output/main.md", "body")
	}
	var other, same error
	sink := runs.SinkFunc(func(ctx context.Context, req runs.CommitRequest) (json.RawMessage, error) {
		if req.RunID == a.ID {
			_, other = e.svc.Commit(context.Background(), b.ID, &recordingSink{}, runs.CommitOptions{})
			_, same = e.svc.Commit(context.Background(), a2.ID, &recordingSink{}, runs.CommitOptions{})
		}
		return nil, nil
	})
	_, err := e.svc.Commit(e.ctx, a.ID, sink, runs.CommitOptions{})
	require.NoError(t, err)
	require.NoError(t, other, "chat-b saves while chat-a's save is in flight")
	requireHostError(t, same, wserr.Busy)
	commits, err := e.svc.Commits(e.ctx, a2.ID)
	require.NoError(t, err)
	assert.Empty(t, commits, "the busy commit records nothing")

	_, err = e.svc.Commit(e.ctx, a2.ID, &recordingSink{}, runs.CommitOptions{})
	require.NoError(t, err, "the chat's turn is free again")
}

// TestFinishRefusedWhileCommitting: Finish called while the run's commit
// is being saved (here, from the sink itself) is refused with store.busy
// (try again) and changes nothing, since the save may still fail and only
// an active run can commit again; once Commit returns, Finish goes
// through, after the commit's outcome in the journal.
func TestFinishRefusedWhileCommitting(t *testing.T) {
	e := newLifecycleEnv(t)
	r := e.create("c1", runs.CreateRequest{})
	e.write(r.ID, "output/main.md", "body")
	var during error
	sink := runs.SinkFunc(func(context.Context, runs.CommitRequest) (json.RawMessage, error) {
		_, during = e.svc.Finish(context.Background(), r.ID)
		return nil, errors.New("chat save failed")
	})
	_, err := e.svc.Commit(e.ctx, r.ID, sink, runs.CommitOptions{})
	requireHostError(t, err, wserr.SinkFailed)
	requireHostError(t, during, wserr.Busy)
	run, err := e.svc.Run(e.ctx, r.ID)
	require.NoError(t, err)
	assert.Equal(t, runs.Running, run.Status, "the run can commit again")

	_, err = e.svc.Commit(e.ctx, r.ID, &recordingSink{}, runs.CommitOptions{})
	require.NoError(t, err)
	_, err = e.svc.Finish(e.ctx, r.ID)
	require.NoError(t, err)
	evs, err := e.st.Journal.Page(e.ctx, r.ID, journal.PageQuery{Limit: journal.MaxLimit})
	require.NoError(t, err)
	var order []journal.Type
	for _, ev := range evs {
		switch ev.Type {
		case journal.ChatCommitFailed, journal.ChatCommitCompleted, journal.RunCompleted:
			order = append(order, ev.Type)
		}
	}
	assert.Equal(t, []journal.Type{journal.ChatCommitFailed, journal.ChatCommitCompleted, journal.RunCompleted}, order)
}

// TestFinishAndCommitConcurrent lines a Finish and a Commit of one run up
// behind another writer, Finish first: whichever runs second must see the
// first, so they never both succeed (a run completed while its commit is
// still to be saved could not commit again if the save failed).
func TestFinishAndCommitConcurrent(t *testing.T) {
	for attempt := range 10 {
		e := newLifecycleEnv(t)
		r := e.create("c", runs.CreateRequest{})
		e.write(r.ID, "output/main.md", "body")

		hold, held := make(chan struct{}), make(chan struct{})
		go e.st.DB.Update(context.Background(), func(*index.Tx) error { close(held); <-hold; return nil })
		<-held
		finished := make(chan error, 1)
		go func() { _, err := e.svc.Finish(e.ctx, r.ID); finished <- err }()
		time.Sleep(10 * time.Millisecond) // Finish is queued behind the writer
		committed := make(chan error, 1)
		go func() {
			_, err := e.svc.Commit(e.ctx, r.ID, &recordingSink{}, runs.CommitOptions{})
			committed <- err
		}()
		time.Sleep(10 * time.Millisecond) // Commit holds the chat's turn and is queued too
		close(hold)
		ferr, cerr := <-finished, <-committed
		assert.False(t, ferr == nil && cerr == nil, "attempt %d: Finish and Commit both succeeded", attempt)
		assert.True(t, ferr == nil || wserr.Is(ferr, wserr.InvalidState) || wserr.Is(ferr, wserr.Busy), "%v", ferr)
		assert.True(t, cerr == nil || wserr.Is(cerr, wserr.InvalidState), "%v", cerr)
	}
}
