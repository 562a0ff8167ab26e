package wsstore_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/wserr"
)

func rowsGone(before, after wsstore.ObjectCounts) wsstore.ObjectCounts {
	return wsstore.ObjectCounts{Blobs: before.Blobs - after.Blobs, Chunks: before.Chunks - after.Chunks, Trees: before.Trees - after.Trees}
}

// TestGCBusyAfterAStepAnswersWhatItFreed: a gc in steps that finds the
// store busy (another process holding the write lock) after its first
// step keeps that step's deletions and answers them with store.busy: the
// rows it reports freed are the rows gone. Run again, it frees the rest.
func TestGCBusyAfterAStepAnswersWhatItFreed(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := wsstore.Open(ctx, dir, wsstore.Options{Index: index.Options{BusyTimeout: 20 * time.Millisecond}, ReclaimIdle: -1})
	require.NoError(t, err)
	defer func() {
		storetest.RequireSound(t, st)
		require.NoError(t, st.Close())
	}()
	storetest.DeletedRunGarbage(t, st, 800)
	before := storetest.ObjectRows(t, st)

	var release func()
	rep, err := st.CollectSteps(ctx, wsstore.GCStepOptions{GCOptions: wsstore.GCOptions{Grace: -1, Progress: func(phase string, done, _ int) {
		if phase == "step" && done == 1 {
			release = storetest.HoldWriteLock(t, filepath.Join(dir, wsstore.DBName))
		}
	}}})
	require.Error(t, err)
	require.NotNil(t, release, "a step committed before the store was busy")
	release()
	assert.Equal(t, wserr.Busy, wserr.CodeOf(err), "%v", err)
	mid := storetest.ObjectRows(t, st)
	assert.Equal(t, rowsGone(before, mid), rep.Freed, "the answer counts the rows its steps deleted")
	assert.Positive(t, rep.Freed.Blobs+rep.Freed.Trees)
	assert.Positive(t, rep.FreedBytes)

	rest, err := st.CollectSteps(ctx, wsstore.GCStepOptions{GCOptions: wsstore.GCOptions{Grace: -1}})
	require.NoError(t, err)
	assert.Positive(t, rest.Freed.Blobs, "what the first left is freed")
	assert.Equal(t, rowsGone(mid, storetest.ObjectRows(t, st)), rest.Freed)
}

// TestReclaimFailingAfterAStepAnswersWhatItFreed: a reclaim whose later
// step fails keeps the steps before it and answers them with its error:
// the rows it reports freed are the rows gone, and the file's size after
// them is given.
func TestReclaimFailingAfterAStepAnswersWhatItFreed(t *testing.T) {
	st := storetest.OpenStoreWith(t, wsstore.Options{ReclaimGrace: -1})
	storetest.DeletedRunGarbage(t, st, 800)
	before := storetest.ObjectRows(t, st)
	total := before.Blobs + before.Trees
	storetest.RefuseDeletesAfter(t, st.DB, 300, "blobs", "chunks", "trees")

	rep, err := st.Reclaim(context.Background())
	require.Error(t, err)
	after := storetest.ObjectRows(t, st)
	assert.Equal(t, rowsGone(before, after), rep.GC.Freed, "the answer counts the rows its steps deleted")
	gone := rep.GC.Freed.Blobs + rep.GC.Freed.Trees
	assert.Positive(t, gone)
	assert.LessOrEqual(t, gone, 300)
	assert.Less(t, after.Blobs+after.Trees, total)
	assert.Positive(t, rep.Checked)
	assert.Positive(t, rep.FileBytesAfter, "the file's size after the steps that committed")
}

// TestPruneFailingAfterARunAnswersWhatItDeleted: a prune whose third
// run's deletion fails keeps the two runs it deleted before and answers
// them with its error.
func TestPruneFailingAfterARunAnswersWhatItDeleted(t *testing.T) {
	ctx := context.Background()
	st := storetest.OpenStore(t)
	storetest.PrunableRuns(t, st, 5)
	storetest.RefuseDeletesAfter(t, st.DB, 2, "runs")

	rep, err := st.Runs.Prune(ctx, runs.PruneOptions{})
	require.Error(t, err)
	assert.Equal(t, 2, rep.RunCount, "the runs deleted before the failure")
	require.Len(t, rep.Runs, 2)
	assert.Equal(t, 3, storetest.CountRows(t, st.DB, "runs"), "5 runs, 2 deleted")
	for _, r := range rep.Runs {
		_, err := st.Runs.Run(ctx, r.RunID)
		assert.Equal(t, wserr.RunNotFound, wserr.CodeOf(err), "%s is gone", r.RunID)
	}
}
