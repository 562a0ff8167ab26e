package runs_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/journal"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/wserr"
)

// orphanRows counts the rows that name a run that does not exist.
func orphanRows(e *lifecycleEnv) map[string]int {
	e.t.Helper()
	out := map[string]int{}
	for _, table := range []string{"events", "checkpoints", "commits"} {
		var n int
		require.NoError(e.t, e.st.DB.View(e.ctx, func(tx *index.Tx) error {
			return tx.GetContext(e.ctx, &n, `SELECT count(*) FROM `+table+` WHERE run_id NOT IN (SELECT id FROM runs)`)
		}))
		out[table] = n
	}
	return out
}

// TestCommitOfDeletedRun deletes the run while the chat sink is saving its
// message: the late outcome must not be journaled for a run that no longer
// exists, and the caller must hear that nothing was recorded.
func TestCommitOfDeletedRun(t *testing.T) {
	cancelAndDelete := func(e *lifecycleEnv, runID string) {
		_, err := e.svc.CancelAndDeleteRun(context.Background(), runID)
		require.NoError(e.t, err)
	}
	saveConflict := errors.New("save conflict")
	cases := []struct {
		name     string
		delete   func(e *lifecycleEnv, runID string)
		sinkErr  error
		rollback bool // roll back a completed commit instead of committing
	}{
		{name: "CancelAndDeleteRun", delete: cancelAndDelete},
		{name: "DeleteRun", delete: func(e *lifecycleEnv, runID string) {
			require.NoError(e.t, e.svc.SetStatus(context.Background(), runID, runs.Cancelled, "user deleted the chat"))
			require.NoError(e.t, e.svc.DeleteRun(context.Background(), runID))
		}},
		{name: "SinkFailed", delete: cancelAndDelete, sinkErr: saveConflict},
		{name: "RollbackCommit", delete: cancelAndDelete, rollback: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newLifecycleEnv(t)
			e.create("c1", runs.CreateRequest{RunID: "run_x"})
			e.write("run_x", "output/main.md", "hello")
			var cp int64
			if tc.rollback {
				rec, err := e.svc.Commit(e.ctx, "run_x", &recordingSink{}, runs.CommitOptions{})
				require.NoError(t, err)
				cp, err = checkpointSeq(rec.CheckpointID)
				require.NoError(t, err)
			}
			sink := runs.SinkFunc(func(ctx context.Context, req runs.CommitRequest) (json.RawMessage, error) {
				tc.delete(e, req.RunID) // the host deletes the run while the save is in flight
				if tc.sinkErr != nil {
					return nil, tc.sinkErr
				}
				return json.RawMessage(`{"messageId":7}`), nil
			})

			var rec runs.CommitRecord
			var err error
			if tc.rollback {
				rec, err = e.svc.RollbackCommit(e.ctx, "run_x", cp, sink, false)
			} else {
				rec, err = e.svc.Commit(e.ctx, "run_x", sink, runs.CommitOptions{})
			}
			requireHostError(t, err, wserr.RunNotFound)
			assert.Contains(t, err.Error(), "deleted while its commit")
			if tc.sinkErr != nil {
				assert.ErrorIs(t, err, tc.sinkErr, "the sink's own error stays reachable")
			} else {
				assert.JSONEq(t, `{"messageId":7}`, string(rec.Receipt), "the host learns what its sink saved")
			}
			assert.Equal(t, map[string]int{"events": 0, "checkpoints": 0, "commits": 0}, orphanRows(e))

			again := e.create("c1", runs.CreateRequest{RunID: "run_x"})
			evs, err := e.st.Journal.Page(e.ctx, again.ID, journal.PageQuery{Limit: journal.MaxLimit})
			require.NoError(t, err)
			require.NotEmpty(t, evs)
			assert.Equal(t, journal.RunCreated, evs[0].Type, "a run created under the same id starts its own journal")
			for i, ev := range evs {
				assert.EqualValues(t, i+1, ev.Seq)
			}
		})
	}
}

// TestCommitOfDeletedRunLeavesItsSuccessorAlone deletes the run while its
// sink runs and creates one under the same id whose own commit, with the
// same commit id, is still pending when the first sink returns: the late
// outcome must not complete the new run's commit. The new commit comes
// from another Service on the same store, as from another process: one
// Service saves to a chat one commit at a time.
func TestCommitOfDeletedRunLeavesItsSuccessorAlone(t *testing.T) {
	e := newLifecycleEnv(t)
	other := e.service(runs.Options{})
	e.create("c1", runs.CreateRequest{RunID: "run_x"})
	e.write("run_x", "output/main.md", "first life")

	type result struct {
		rec runs.CommitRecord
		err error
	}
	second := make(chan result, 1)
	inSink, release, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	waiting := runs.SinkFunc(func(context.Context, runs.CommitRequest) (json.RawMessage, error) {
		close(inSink)
		<-release
		return json.RawMessage(`{"messageId":2}`), nil
	})
	late := runs.SinkFunc(func(ctx context.Context, req runs.CommitRequest) (json.RawMessage, error) {
		_, err := e.svc.CancelAndDeleteRun(context.Background(), "run_x")
		require.NoError(t, err)
		e.create("c1", runs.CreateRequest{RunID: "run_x"})
		e.write("run_x", "output/main.md", "second life")
		go func() {
			defer close(done)
			rec, err := other.Commit(context.Background(), "run_x", waiting, runs.CommitOptions{})
			second <- result{rec, err}
		}()
		select {
		case <-inSink:
		case <-done:
		}
		return json.RawMessage(`{"messageId":1}`), nil
	})

	first, err := e.svc.Commit(e.ctx, "run_x", late, runs.CommitOptions{})
	requireHostError(t, err, wserr.RunNotFound)
	commits, err := e.svc.Commits(e.ctx, "run_x")
	require.NoError(t, err)
	require.Len(t, commits, 1)
	assert.Equal(t, first.ID, commits[0].ID, "the new run reuses the commit id")
	assert.Equal(t, runs.CommitPending, commits[0].Status, "the new run's commit is its own sink's to complete")

	close(release)
	res := <-second
	require.NoError(t, res.err)
	assert.Equal(t, runs.CommitCompleted, res.rec.Status)
	commits, err = e.svc.Commits(e.ctx, "run_x")
	require.NoError(t, err)
	require.Len(t, commits, 1)
	assert.Equal(t, runs.CommitCompleted, commits[0].Status)
	assert.JSONEq(t, `{"messageId":2}`, string(commits[0].Receipt))
	assert.Equal(t, "second life", commits[0].Message.Body)

	evs, err := e.st.Journal.Page(e.ctx, "run_x", journal.PageQuery{Limit: journal.MaxLimit})
	require.NoError(t, err)
	completed := 0
	for i, ev := range evs {
		assert.EqualValues(t, i+1, ev.Seq)
		if ev.Type == journal.ChatCommitCompleted {
			completed++
		}
	}
	assert.Equal(t, journal.RunCreated, evs[0].Type)
	assert.Equal(t, 1, completed, "one commit, one completion")
}
