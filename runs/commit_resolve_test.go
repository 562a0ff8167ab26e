package runs_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/journal"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/wserr"
)

// stuckCommit starts a commit of runID through svc whose sink does not
// return until the test ends, as a commit looks to every other Service
// once the process calling its sink has died: pending, with no outcome to
// come. It returns once the sink holds the request, and what the commit
// call returns once the sink is let go.
func (e *lifecycleEnv) stuckCommit(svc *runs.Service, runID string, rollbackTo int64) (runs.CommitRequest, func() error) {
	e.t.Helper()
	held, release := make(chan runs.CommitRequest, 1), make(chan struct{})
	sink := runs.SinkFunc(func(_ context.Context, req runs.CommitRequest) (json.RawMessage, error) {
		held <- req
		<-release
		return json.RawMessage(`{"messageId":"late"}`), nil
	})
	done := make(chan error, 1)
	go func() {
		var err error
		if rollbackTo > 0 {
			_, err = svc.RollbackCommit(context.Background(), runID, rollbackTo, sink, false)
		} else {
			_, err = svc.Commit(context.Background(), runID, sink, runs.CommitOptions{})
		}
		done <- err
	}()
	var req runs.CommitRequest
	select {
	case req = <-held:
	case err := <-done:
		e.t.Fatalf("commit ended before its sink was called: %v", err)
	}
	var once sync.Once
	var err error
	let := func() error {
		once.Do(func() {
			close(release)
			err = <-done
		})
		return err
	}
	e.t.Cleanup(func() { _ = let() })
	return req, let
}

// TestResolveCommitLeftPending: a commit whose delivering process is gone
// stays pending, and retention keeps its run while saying so; the host
// resolves it as completed or failed, journaled as a delivery would be
// (a rollback completed also journals commit_rolled_back); after that
// retention deletes the run. Bad outcomes, unknown commits and commits no
// longer pending are refused and change nothing.
func TestResolveCommitLeftPending(t *testing.T) {
	for _, tc := range []struct {
		name     string
		outcome  runs.CommitOutcome
		rollback bool
		want     []journal.Type
		receipt  string
	}{
		{name: "Completed", outcome: runs.CommitOutcome{Status: runs.CommitCompleted, Receipt: json.RawMessage(`{"messageId":9}`)},
			want: []journal.Type{journal.ChatCommitCompleted}, receipt: `{"messageId":9}`},
		{name: "Failed", outcome: runs.CommitOutcome{Status: runs.CommitFailed, Error: "not in the chat"},
			want: []journal.Type{journal.ChatCommitFailed}, receipt: `{}`},
		{name: "RollbackCompleted", outcome: runs.CommitOutcome{Status: runs.CommitCompleted, Receipt: json.RawMessage(`saved`)}, rollback: true,
			want: []journal.Type{journal.ChatCommitCompleted, journal.CommitRolledBack}, receipt: `"saved"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newLifecycleEnv(t)
			gone := e.service(runs.Options{}) // the process that dies while its sink runs
			e.create("c1", runs.CreateRequest{RunID: "run_x"})
			e.write("run_x", "output/main.md", "hello")
			var cp int64
			if tc.rollback {
				rec, err := e.svc.Commit(e.ctx, "run_x", &recordingSink{}, runs.CommitOptions{})
				require.NoError(t, err)
				cp, err = checkpointSeq(rec.CheckpointID)
				require.NoError(t, err)
			}
			req, _ := e.stuckCommit(gone, "run_x", cp)
			_, err := e.svc.Finish(e.ctx, "run_x")
			require.NoError(t, err)
			zero := 0
			require.NoError(t, e.svc.SetPolicy(e.ctx, runs.StoreScope, runs.Policy{KeepCompletedRuns: &zero}))

			rep, err := e.svc.Prune(e.ctx, runs.PruneOptions{})
			require.NoError(t, err)
			assert.Empty(t, rep.Runs, "a run with a pending commit is kept")
			require.Len(t, rep.Held, 1, "and the report says so")
			assert.Equal(t, runs.HeldRun{RunID: "run_x", ChatID: req.ChatID, Status: runs.Completed, Reason: "keepCompletedRuns",
				PendingCommits: []string{req.CommitID}}, rep.Held[0])

			before := e.lastSeq("run_x")
			for _, bad := range []struct {
				commit string
				out    runs.CommitOutcome
				code   wserr.Code
			}{
				{req.CommitID, runs.CommitOutcome{Status: "pending"}, wserr.InvalidArgument},
				{req.CommitID, runs.CommitOutcome{Status: ""}, wserr.InvalidArgument},
				{req.CommitID, runs.CommitOutcome{Status: runs.CommitCompleted, Error: "but failed"}, wserr.InvalidArgument},
				{"commit_run_x_0099", tc.outcome, wserr.NotFound},
			} {
				_, err := e.svc.ResolveCommit(e.ctx, "run_x", bad.commit, bad.out)
				assert.Equal(t, bad.code, wserr.CodeOf(err), "%+v: %v", bad, err)
			}
			_, err = e.svc.ResolveCommit(e.ctx, "run_nope", req.CommitID, tc.outcome)
			assert.Equal(t, wserr.RunNotFound, wserr.CodeOf(err), "%v", err)
			assert.Equal(t, before, e.lastSeq("run_x"), "a refused resolve journals nothing")

			rec, err := e.svc.ResolveCommit(e.ctx, "run_x", req.CommitID, tc.outcome)
			require.NoError(t, err)
			assert.Equal(t, tc.outcome.Status, rec.Status)
			assert.Equal(t, req.CommitID, rec.ID)
			commits, err := e.svc.Commits(e.ctx, "run_x")
			require.NoError(t, err)
			stored := commits[len(commits)-1]
			assert.Equal(t, req.CommitID, stored.ID)
			assert.Equal(t, tc.outcome.Status, stored.Status)
			assert.JSONEq(t, tc.receipt, string(stored.Receipt))
			assert.Equal(t, tc.outcome.Error, stored.Error)
			assert.Equal(t, req.Message.Body, stored.Message.Body)

			evs := e.eventsAfter("run_x", before)
			require.Len(t, evs, len(tc.want))
			for i, ev := range evs {
				assert.Equal(t, tc.want[i], ev.Type)
				var payload map[string]any
				require.NoError(t, json.Unmarshal(ev.Payload, &payload))
				assert.Equal(t, req.CommitID, payload["commitId"])
				if i == 0 {
					assert.Equal(t, true, payload["resolved"], "a stated outcome is told from a delivered one")
				}
			}

			_, err = e.svc.ResolveCommit(e.ctx, "run_x", req.CommitID, runs.CommitOutcome{Status: runs.CommitFailed})
			requireHostError(t, err, wserr.InvalidState)
			assert.Equal(t, before+int64(len(tc.want)), e.lastSeq("run_x"), "resolved once")

			rep, err = e.svc.Prune(e.ctx, runs.PruneOptions{})
			require.NoError(t, err)
			assert.Empty(t, rep.Held)
			require.Len(t, rep.Runs, 1, "resolved, the run goes as the policy says")
			assert.Equal(t, "run_x", rep.Runs[0].RunID)
		})
	}
}

// TestResolveCommitBeforeTheLateDelivery: a host resolves a commit whose
// sink, in another process, was only slow; when that sink returns, its
// outcome does not overwrite the resolved one, and its caller hears so.
func TestResolveCommitBeforeTheLateDelivery(t *testing.T) {
	e := newLifecycleEnv(t)
	slow := e.service(runs.Options{})
	e.create("c1", runs.CreateRequest{RunID: "run_x"})
	e.write("run_x", "output/main.md", "hello")
	req, let := e.stuckCommit(slow, "run_x", 0)
	_, err := e.svc.ResolveCommit(e.ctx, "run_x", req.CommitID, runs.CommitOutcome{Status: runs.CommitFailed, Error: "timed out"})
	require.NoError(t, err)
	before := e.lastSeq("run_x")

	err = let()
	requireHostError(t, err, wserr.InvalidState)
	assert.Contains(t, err.Error(), "resolved as failed")
	commits, err := e.svc.Commits(e.ctx, "run_x")
	require.NoError(t, err)
	require.Len(t, commits, 1)
	assert.Equal(t, runs.CommitFailed, commits[0].Status)
	assert.Equal(t, "timed out", commits[0].Error)
	assert.JSONEq(t, `{}`, string(commits[0].Receipt))
	assert.Equal(t, before, e.lastSeq("run_x"), "the late outcome journals nothing")
}

// TestResolveCommitWhileSaving: while this Service saves a commit to the
// chat, resolving is store.busy (the pending commit may be that very one)
// and changes nothing.
func TestResolveCommitWhileSaving(t *testing.T) {
	e := newLifecycleEnv(t)
	e.create("c1", runs.CreateRequest{RunID: "run_x"})
	e.write("run_x", "output/main.md", "hello")
	req, let := e.stuckCommit(e.svc, "run_x", 0)
	_, err := e.svc.ResolveCommit(e.ctx, "run_x", req.CommitID, runs.CommitOutcome{Status: runs.CommitFailed})
	requireHostError(t, err, wserr.Busy)
	require.NoError(t, let())
	commits, err := e.svc.Commits(e.ctx, "run_x")
	require.NoError(t, err)
	require.Len(t, commits, 1)
	assert.Equal(t, runs.CommitCompleted, commits[0].Status, "the sink's own outcome is recorded")
	assert.JSONEq(t, `{"messageId":"late"}`, string(commits[0].Receipt))
}

// TestCommitOutcomeNotRecorded: the sink saved the message but recording
// that failed (here the journal, injected): the commit stays pending, the
// caller gets the sink's receipt and hears that the sink saved it, and
// resolves the commit with that receipt.
func TestCommitOutcomeNotRecorded(t *testing.T) {
	e := newLifecycleEnv(t)
	e.create("c1", runs.CreateRequest{RunID: "run_x"})
	e.write("run_x", "output/main.md", "hello")
	faults := e.withFaults(runs.Options{})
	faults.failOnce(string(journal.ChatCommitCompleted), errInjected)
	sink := runs.SinkFunc(func(context.Context, runs.CommitRequest) (json.RawMessage, error) {
		return json.RawMessage(`{"messageId":11}`), nil
	})
	rec, err := e.svc.Commit(e.ctx, "run_x", sink, runs.CommitOptions{})
	require.ErrorIs(t, err, errInjected)
	assert.Contains(t, err.Error(), "the chat sink saved the message")
	assert.JSONEq(t, `{"messageId":11}`, string(rec.Receipt), "the receipt reaches the caller")
	assert.Equal(t, runs.CommitPending, rec.Status)
	commits, err := e.svc.Commits(e.ctx, "run_x")
	require.NoError(t, err)
	require.Len(t, commits, 1)
	assert.Equal(t, runs.CommitPending, commits[0].Status)

	got, err := e.svc.ResolveCommit(e.ctx, "run_x", rec.ID, runs.CommitOutcome{Status: runs.CommitCompleted, Receipt: rec.Receipt})
	require.NoError(t, err)
	assert.Equal(t, runs.CommitCompleted, got.Status)
	assert.JSONEq(t, `{"messageId":11}`, string(got.Receipt))
}

// TestMergeCommitsMovesOnlyPending: a merge gives a pending commit the
// outcome the incoming state holds, imports a commit the store lacks, and
// leaves a commit already completed or failed here as it is, whatever
// the incoming state says; a status no commit has is store.corrupt.
func TestMergeCommitsMovesOnlyPending(t *testing.T) {
	e := newLifecycleEnv(t)
	gone := e.service(runs.Options{})
	e.create("c1", runs.CreateRequest{RunID: "run_x"})
	e.write("run_x", "output/main.md", "hello")
	done, err := e.svc.Commit(e.ctx, "run_x", &recordingSink{}, runs.CommitOptions{})
	require.NoError(t, err)
	req, _ := e.stuckCommit(gone, "run_x", 0)

	rows := map[string]runs.CommitRow{}
	require.NoError(t, e.st.DB.View(e.ctx, func(tx *index.Tx) error {
		return e.svc.EachCommitRow(e.ctx, tx, "run_x", func(c runs.CommitRow) error { rows[c.ID] = c; return nil })
	}))
	pending, completed := rows[req.CommitID], rows[done.ID]
	require.Equal(t, runs.CommitPending, pending.Status)
	bad := pending
	bad.Status = "lost"
	err = e.st.DB.Update(e.ctx, func(tx *index.Tx) error {
		return e.svc.MergeCommits(e.ctx, tx, "run_x", []runs.CommitRow{bad})
	})
	assert.Equal(t, wserr.Corrupt, wserr.CodeOf(err), "%v", err)
	bad.ID, bad.Seq = "commit_run_x_0009", 9
	err = e.st.DB.Update(e.ctx, func(tx *index.Tx) error {
		return e.svc.MergeCommits(e.ctx, tx, "run_x", []runs.CommitRow{bad})
	})
	assert.Equal(t, wserr.Corrupt, wserr.CodeOf(err), "a commit imported with a status no commit has: %v", err)
	pending.Status, pending.Receipt = runs.CommitFailed, `{"why":"elsewhere"}`
	completed.Status, completed.Receipt = runs.CommitPending, `{}`
	added := completed
	added.ID, added.Seq, added.Status = "commit_run_x_0003", 3, runs.CommitCompleted
	require.NoError(t, e.st.DB.Update(e.ctx, func(tx *index.Tx) error {
		return e.svc.MergeCommits(e.ctx, tx, "run_x", []runs.CommitRow{completed, pending, added})
	}))
	cs, err := e.svc.Commits(e.ctx, "run_x")
	require.NoError(t, err)
	require.Len(t, cs, 3)
	assert.Equal(t, runs.CommitCompleted, cs[0].Status, "an outcome recorded here stays")
	assert.JSONEq(t, `{"messageId":42}`, string(cs[0].Receipt))
	assert.Equal(t, runs.CommitFailed, cs[1].Status, "a pending commit takes the incoming outcome")
	assert.JSONEq(t, `{"why":"elsewhere"}`, string(cs[1].Receipt))
	assert.Equal(t, "commit_run_x_0003", cs[2].ID, "a commit the store lacks is imported")

}

// TestPruneKeepsARunCommittedMeanwhile: a commit another process begins
// after a retention pass read its candidates, and before the pass deletes
// them (a rollback's, which a finished run may make), keeps the run: the
// deleting transaction looks again, and the report lists the run as
// held, with the new commit.
func TestPruneKeepsARunCommittedMeanwhile(t *testing.T) {
	e := newLifecycleEnv(t)
	other := e.service(runs.Options{})
	e.create("c1", runs.CreateRequest{RunID: "run_x"})
	e.write("run_x", "output/main.md", "hello")
	rec, err := e.svc.Commit(e.ctx, "run_x", &recordingSink{}, runs.CommitOptions{})
	require.NoError(t, err)
	cp, err := checkpointSeq(rec.CheckpointID)
	require.NoError(t, err)
	_, err = e.svc.Finish(e.ctx, "run_x")
	require.NoError(t, err)
	zero := 0
	require.NoError(t, e.svc.SetPolicy(e.ctx, runs.StoreScope, runs.Policy{KeepCompletedRuns: &zero}))
	var req runs.CommitRequest
	gaps := 0
	defer runs.SetPruneGap(func() {
		if gaps++; gaps == 1 {
			req, _ = e.stuckCommit(other, "run_x", cp)
		}
	})()

	rep, err := e.svc.Prune(e.ctx, runs.PruneOptions{})
	require.NoError(t, err)
	require.Equal(t, 1, gaps)
	assert.Empty(t, rep.Runs, "kept for the commit begun meanwhile")
	require.Len(t, rep.Held, 1, "and the report says so")
	assert.Equal(t, runs.HeldRun{RunID: "run_x", ChatID: req.ChatID, Status: runs.Completed, Reason: "keepCompletedRuns",
		PendingCommits: []string{req.CommitID}}, rep.Held[0])
	assert.Positive(t, e.lastSeq("run_x"), "the run is there")
}

// TestAnOutcomePrunesWhenAutomatic: with automatic pruning on, a finished
// run that a pass kept for its pending commit goes as soon as the commit's
// outcome is recorded, resolved by the host or delivered by a sink that
// outlasted the run, rather than when another run of the store ends.
func TestAnOutcomePrunesWhenAutomatic(t *testing.T) {
	for _, how := range []string{"resolved", "delivered"} {
		t.Run(how, func(t *testing.T) {
			e := newLifecycleEnv(t)
			on := true
			auto := e.service(runs.Options{AutoPrune: &on})
			e.create("c1", runs.CreateRequest{RunID: "run_x"})
			e.write("run_x", "output/main.md", "hello")
			zero := 0
			require.NoError(t, auto.SetPolicy(e.ctx, runs.StoreScope, runs.Policy{KeepCompletedRuns: &zero}))
			var req runs.CommitRequest
			var deliver func() error
			if how == "resolved" {
				req, _ = e.stuckCommit(e.service(runs.Options{}), "run_x", 0) // its process is gone
			} else {
				// Another process ends the run while this one's sink runs.
				req, deliver = e.stuckCommit(e.service(runs.Options{AutoPrune: &on}), "run_x", 0)
			}
			_, err := auto.Finish(e.ctx, "run_x") // its pass keeps the run
			require.NoError(t, err)
			_, err = auto.Run(e.ctx, "run_x")
			require.NoError(t, err, "kept while its commit is pending")

			if how == "resolved" {
				_, err = auto.ResolveCommit(e.ctx, "run_x", req.CommitID, runs.CommitOutcome{Status: runs.CommitCompleted})
			} else {
				err = deliver()
			}
			require.NoError(t, err)
			_, err = auto.Run(e.ctx, "run_x")
			assert.True(t, wserr.Is(err, wserr.RunNotFound), "pruned once the outcome is recorded: %v", err)
		})
	}
}
