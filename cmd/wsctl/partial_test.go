package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/actors"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/runs"
)

// openQuiet opens the cli's store, creating it, without the background
// collection (which would delete beside the command under test).
func (c *cli) openQuiet() *wsstore.Store {
	c.t.Helper()
	st, err := wsstore.Open(context.Background(), c.store, wsstore.Options{ReclaimIdle: -1})
	require.NoError(c.t, err)
	c.t.Cleanup(func() { st.Close() })
	return st
}

// TestGCFailingPartWayPrintsWhatItFreed: a gc whose later step fails
// prints what the steps before it freed (the rows gone), as a table and
// as --json, and exits with the error's status, the error on stderr.
func TestGCFailingPartWayPrintsWhatItFreed(t *testing.T) {
	c := newCLI(t)
	st := c.openQuiet()
	storetest.DeletedRunGarbage(t, st, 800)
	storetest.RefuseDeletesAfter(t, st.DB, 300, "blobs", "chunks", "trees")

	before := storetest.ObjectRows(t, st)
	out, errOut, code := c.run("", "gc", "--grace", "0", "--json")
	assert.Equal(t, 1, code, "the error's status")
	assert.Contains(t, errOut, "the test refuses this delete")
	var rep wsstore.GCReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep), "one JSON document: %s", out)
	mid := storetest.ObjectRows(t, st)
	assert.Equal(t, before.Blobs-mid.Blobs, rep.Freed.Blobs, "the rows gone")
	assert.Equal(t, before.Trees-mid.Trees, rep.Freed.Trees, "the rows gone")
	assert.Positive(t, rep.Freed.Blobs+rep.Freed.Trees)

	_, err := rawDB(t, c).Exec(`UPDATE test_refuse_deletes SET allowed = allowed + 300`)
	require.NoError(t, err)
	out, errOut, code = c.run("", "gc", "--grace", "0")
	assert.Equal(t, 1, code, "the error's status")
	assert.Contains(t, errOut, "the test refuses this delete")
	after := storetest.ObjectRows(t, st)
	gone := (mid.Blobs - after.Blobs) + (mid.Trees - after.Trees)
	assert.Positive(t, gone)
	assert.Contains(t, out, "stopped by an error after freeing the above")
	assert.Regexp(t, fmt.Sprintf(`freed\s+%d\s+0\s+%d`, mid.Blobs-after.Blobs, mid.Trees-after.Trees), out)
}

// TestPruneFailingPartWayPrintsWhatItDeleted: a prune whose third run's
// deletion fails prints the two runs it deleted, in text and --json, and
// exits with the error's status.
func TestPruneFailingPartWayPrintsWhatItDeleted(t *testing.T) {
	c := newCLI(t)
	st := c.openQuiet()
	storetest.PrunableRuns(t, st, 5)
	storetest.RefuseDeletesAfter(t, st.DB, 2, "runs")

	out, errOut, code := c.run("", "prune", "--json")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "the test refuses this delete")
	var rep runs.PruneReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep), "one JSON document: %s", out)
	assert.Equal(t, 2, rep.RunCount)
	assert.Equal(t, 3, storetest.CountRows(t, st.DB, "runs"))

	_, err := rawDB(t, c).Exec(`UPDATE test_refuse_deletes SET allowed = allowed + 1`)
	require.NoError(t, err)
	out, _, code = c.run("", "prune")
	assert.Equal(t, 1, code)
	assert.Equal(t, 1, strings.Count(out, "deleted run "), out)
	assert.Contains(t, out, "1 runs, 0 runs' checkpoints; stopped by an error after these")
	assert.Equal(t, 2, storetest.CountRows(t, st.DB, "runs"))

	// Nothing deleted: the error alone.
	out, _, code = c.run("", "prune", "--json")
	assert.Equal(t, 1, code)
	assert.Empty(t, out)
}

// TestActorGCFailingAfterThePrunePrintsWhatItPruned: an actor gc whose
// collection fails after the prune prints the versions pruned, in text
// and --json, and exits with the error's status.
func TestActorGCFailingAfterThePrunePrintsWhatItPruned(t *testing.T) {
	ctx := context.Background()
	c := newCLI(t)
	st := c.openQuiet()
	for _, actor := range []string{"alice", "bob"} {
		for _, v := range []string{"1", "2", "3"} {
			_, err := st.Actors.Upload(ctx, actor, "a.md", strings.NewReader(actor+v))
			require.NoError(t, err)
		}
	}
	storetest.RefuseDeletesAfter(t, st.DB, 0, "blobs", "chunks", "trees")

	out, errOut, code := c.run("", "actor", "gc", "alice", "--grace", "0", "--json")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "the test refuses this delete")
	var rep actorGCResult
	require.NoError(t, json.Unmarshal([]byte(out), &rep), "one JSON document: %s", out)
	assert.Equal(t, actors.GCReport{Actors: 1, Pruned: 2}, rep.Pruned)
	assert.Zero(t, rep.GC.Freed)

	out, _, code = c.run("", "actor", "gc", "bob", "--grace", "0")
	assert.Equal(t, 1, code)
	assert.Contains(t, out, "pruned 2 versions of 1 actors; freed 0 blobs")
	assert.Contains(t, out, "stopped by an error after the above")
	stats, err := st.Actors.Stats(ctx, "bob")
	require.NoError(t, err)
	assert.Equal(t, int64(1), stats.Versions)
}
