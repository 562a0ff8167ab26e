package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

// stuckCommit commits runID through st with a sink that does not return
// until the test ends: to every other process (the wsctl commands the
// test runs open the store anew) the commit is pending, as it is for good
// once the process calling its sink dies. It returns the commit's id.
func stuckCommit(t *testing.T, st *wsstore.Store, runID string) string {
	t.Helper()
	_, err := st.Runs.Workspace(runID, runs.ModelScope).Write(context.Background(), vfs.MustPath("output/main.md"), []byte("the message\n"), vfs.WriteOptions{})
	require.NoError(t, err)
	held, release, done := make(chan string, 1), make(chan struct{}), make(chan struct{})
	sink := runs.SinkFunc(func(_ context.Context, req runs.CommitRequest) (json.RawMessage, error) {
		held <- req.CommitID
		<-release
		return nil, nil
	})
	go func() {
		defer close(done)
		_, _ = st.Runs.Commit(context.Background(), runID, sink, runs.CommitOptions{})
	}()
	t.Cleanup(func() { close(release); <-done })
	select {
	case id := <-held:
		return id
	case <-done:
		t.Fatal("the commit ended before its sink was called")
		return ""
	}
}

// TestResolveCommitCommands: prune keeps, and names, runs with a pending
// commit; batch commit.resolve and wsctl resolve-commit record what became
// of each, refusing bad outcomes and commits no longer pending; then prune
// deletes the runs.
func TestResolveCommitCommands(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	st := c.open()
	seedChatRun(t, st, "s1", "r1", false)
	seedChatRun(t, st, "s2", "r2", false)
	id1, id2 := stuckCommit(t, st, "r1"), stuckCommit(t, st, "r2")
	c.ok("policy", "--set", "keepCompletedRuns=0")
	// Finished by another process: this one's Finish would wait for the
	// save in flight.
	for _, r := range c.batch(`{"op":"finish","runId":"r1"}` + "\n" + `{"op":"finish","runId":"r2"}` + "\n") {
		require.True(t, r.OK, "%+v", r.Error)
	}

	var rep runs.PruneReport
	c.jsonOut(&rep, "prune")
	assert.Empty(t, rep.Runs)
	require.Len(t, rep.Held, 2)
	assert.Equal(t, []string{id1}, rep.Held[0].PendingCommits)
	assert.Equal(t, "keepCompletedRuns", rep.Held[0].Reason)
	out := c.ok("prune", "--dry-run")
	assert.Contains(t, out, "kept run r1 (")
	assert.Contains(t, out, "for its pending commits "+id2+": resolve them with \"wsctl resolve-commit\"")

	rs := c.batch(strings.Join([]string{
		`{"op":"commit.resolve","runId":"r1","commitId":"` + id1 + `","status":"done"}`,
		`{"op":"commit.resolve","runId":"r1","status":"failed"}`,
		`{"op":"commit.resolve","runId":"r1","commitId":"commit_r1_0042","status":"failed"}`,
		`{"op":"commit.resolve","runId":"r1","commitId":"` + id1 + `","status":"completed","error":"boom"}`,
		`{"op":"commit.resolve","runId":"r1","commitId":"` + id1 + `","status":"completed","receipt":{"messageId":3}}`,
		`{"op":"commit.resolve","runId":"r1","commitId":"` + id1 + `","status":"failed"}`,
	}, "\n") + "\n")
	assert.Equal(t, "batch.invalid_request", rs[0].code(), "a host's mistake, not a model's")
	assert.False(t, rs[1].OK, "a commit id is needed")
	assert.Equal(t, "store.not_found", rs[2].code())
	assert.Equal(t, "batch.invalid_request", rs[3].code(), "an error with completed is a host's mistake too")
	require.True(t, rs[4].OK, "%+v", rs[4].Error)
	assert.Equal(t, "completed", rs[4].Result["status"])
	assert.Equal(t, map[string]any{"messageId": float64(3)}, rs[4].Result["receipt"])
	assert.Equal(t, "run.invalid_transition", rs[5].code())

	c.fails(2, "resolve-commit", "r2", id2, "pending")
	c.fails(2, "resolve-commit", "r2", id2, "completed", "--error", "x")
	c.fails(3, "resolve-commit", "r2", "commit_r2_0042", "failed")
	out = c.ok("resolve-commit", "r2", id2, "failed", "--error", "not in the chat")
	assert.Equal(t, "commit "+id2+" of run r2: failed\n", out)
	errOut := c.fails(5, "resolve-commit", "r2", id2, "failed")
	assert.Contains(t, errOut, "run.invalid_transition")
	assert.Contains(t, c.ok("log", "r2"), id2+" (resolved): not in the chat")
	var d runDetails
	c.jsonOut(&d, "show", "r2")
	require.Len(t, d.Commits, 1)
	assert.Equal(t, runs.CommitFailed, d.Commits[0].Status)
	assert.Equal(t, "not in the chat", d.Commits[0].Error)

	rep = runs.PruneReport{}
	c.jsonOut(&rep, "prune")
	assert.Empty(t, rep.Held)
	assert.Len(t, rep.Runs, 2, "resolved, both runs go as the policy says")
}
