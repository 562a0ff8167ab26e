package runs_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/journal"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/wserr"
)

// TestCommitSavesOneAtATimePerChatConcurrent commits from several runs of
// one chat at once: the chat sink is never called for that chat while
// another call is in flight, and every commit completes.
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
	errs := make([]error, n)
	for i, id := range ids {
		wg.Go(func() {
			_, errs[i] = e.svc.Commit(e.ctx, id, sink, runs.CommitOptions{})
		})
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, ids[i])
	}
	assert.Equal(t, int32(1), most.Load(), "one save at a time for a chat")
}

// TestCommitSavesOfOtherChatsDoNotWait: a save in flight for one chat does
// not hold up another chat's, and a commit that gives up waiting for its
// chat's turn records nothing.
func TestCommitSavesOfOtherChatsDoNotWait(t *testing.T) {
	e := newLifecycleEnv(t)
	a := e.create("chat-a", runs.CreateRequest{})
	b := e.create("chat-b", runs.CreateRequest{})
	a2 := e.create("chat-a", runs.CreateRequest{})
	for _, r := range []runs.Run{a, b, a2} {
		e.write(r.ID, "output/main.md", "body")
	}
	ctx, cancel := context.WithTimeout(e.ctx, time.Minute) // a deadlock fails instead of hanging
	defer cancel()

	entered, release := make(chan struct{}), make(chan struct{})
	blocking := runs.SinkFunc(func(context.Context, runs.CommitRequest) (json.RawMessage, error) {
		close(entered)
		<-release
		return nil, nil
	})
	done := make(chan error)
	go func() {
		_, err := e.svc.Commit(ctx, a.ID, blocking, runs.CommitOptions{})
		done <- err
	}()
	<-entered
	_, err := e.svc.Commit(ctx, b.ID, &recordingSink{}, runs.CommitOptions{})
	require.NoError(t, err, "chat-b saves while chat-a's save is in flight")

	before, err := e.svc.Commits(ctx, a2.ID)
	require.NoError(t, err)
	// chat-a's turn is taken: this commit waits for it, and gives up.
	gaveUp, stop := context.WithTimeout(ctx, 20*time.Millisecond)
	defer stop()
	_, err = e.svc.Commit(gaveUp, a2.ID, &recordingSink{}, runs.CommitOptions{})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	after, err := e.svc.Commits(ctx, a2.ID)
	require.NoError(t, err)
	assert.Equal(t, before, after, "a commit that gave up waiting records nothing")

	close(release)
	require.NoError(t, <-done)
	_, err = e.svc.Commit(ctx, a2.ID, &recordingSink{}, runs.CommitOptions{})
	require.NoError(t, err, "the chat's turn is free again")
}

// TestFinishRefusedWhileCommitting: Finish called while the run's commit
// is being saved (here, from the sink itself) is refused and changes
// nothing, since the save may still fail and only an active run can commit
// again; once Commit returns, Finish goes through, after the commit's
// outcome in the journal.
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
	requireHostError(t, during, wserr.InvalidState)
	run, err := e.svc.Run(e.ctx, r.ID)
	require.NoError(t, err)
	assert.Equal(t, runs.Running, run.Status, "the run can commit again")

	_, err = e.svc.Commit(e.ctx, r.ID, &recordingSink{}, runs.CommitOptions{})
	require.NoError(t, err)
	_, err = e.svc.Finish(e.ctx, r.ID)
	require.NoError(t, err)
	evs, err := e.svc.Journal().Page(e.ctx, r.ID, journal.PageQuery{Limit: journal.MaxLimit})
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
