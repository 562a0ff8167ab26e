package runs_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/runs"
)

// TestPruneReportIsBounded: a pass that deletes more runs, prunes the
// checkpoints of more runs and keeps more runs for their pending commits
// than a report lists (two of each here) lists the first of each, counts
// every one (the checkpoints and their bytes too) as the deletion log
// does, and says it left some out; a dry run reports the same. The
// reclaim's log entry names the pass's first entries and counts them all.
func TestPruneReportIsBounded(t *testing.T) {
	defer runs.SetPruneReportEntries(2)()
	e := newLifecycleEnv(t)
	gone := e.service(runs.Options{}) // the process that dies while its sinks run
	for i := range 5 {                // run_a … run_e: failed, deleted
		r := e.create("failed", runs.CreateRequest{})
		e.write(r.ID, "output/main.md", fmt.Sprint("failed ", i))
		require.NoError(t, e.svc.SetStatus(e.ctx, r.ID, runs.Failed, "model error"))
	}
	for i := range 3 { // run_f … run_h: completed, kept for their pending commits
		r := e.create(fmt.Sprint("pending", i), runs.CreateRequest{}) // a chat saves one commit at a time
		e.write(r.ID, "output/main.md", fmt.Sprint("pending ", i))
		e.stuckCommit(gone, r.ID, 0)
		_, err := e.svc.Finish(e.ctx, r.ID)
		require.NoError(t, err)
	}
	for i := range 3 { // run_i … run_k: active, their checkpoints past the cap
		r := e.create("busy", runs.CreateRequest{})
		for j := range 6 {
			e.write(r.ID, "output/main.md", fmt.Sprint(i, j, string(make([]byte, 600))))
		}
	}
	zero, limit := 0, int64(1000)
	require.NoError(t, e.svc.SetPolicy(e.ctx, runs.StoreScope, runs.Policy{KeepCompletedRuns: &zero, KeepFailedRuns: &zero,
		MaxCheckpointBytesPerRun: &limit}))

	check := func(rep runs.PruneReport) {
		t.Helper()
		assert.True(t, rep.Truncated)
		assert.Equal(t, 5, rep.RunCount)
		require.Len(t, rep.Runs, 2)
		assert.Equal(t, []string{"run_a", "run_b"}, []string{rep.Runs[0].RunID, rep.Runs[1].RunID}, "the first, oldest first")
		assert.Equal(t, 3, rep.CheckpointRuns)
		require.Len(t, rep.Checkpoints, 2)
		assert.Equal(t, 3, rep.HeldCount)
		require.Len(t, rep.Held, 2)
		assert.Contains(t, []string{"run_f", "run_g", "run_h"}, rep.Held[1].RunID)
	}
	dry, err := e.svc.Prune(e.ctx, runs.PruneOptions{DryRun: true})
	require.NoError(t, err)
	check(dry)
	assert.Equal(t, 11, e.count("runs"), "a dry run deletes nothing")

	rep, err := e.svc.Prune(e.ctx, runs.PruneOptions{})
	require.NoError(t, err)
	check(rep)
	assert.Equal(t, dry.CheckpointCount, rep.CheckpointCount)
	assert.Equal(t, dry.CheckpointBytes, rep.CheckpointBytes)
	assert.Equal(t, 6, e.count("runs"))

	ds, _, err := e.svc.Deletions(e.ctx, 0, 0)
	require.NoError(t, err)
	var deleted, checkpoints int
	var bytes int64
	var reclaim map[string]any
	for _, d := range ds {
		switch d.Kind {
		case runs.DeletedRun:
			deleted++
		case runs.DeletedCheckpoints:
			var det struct {
				CheckpointIDs []string `json:"checkpointIds"`
			}
			require.NoError(t, json.Unmarshal(d.Detail, &det))
			checkpoints += len(det.CheckpointIDs)
			bytes += d.BytesFreed
		case runs.Reclaimed:
			require.NoError(t, json.Unmarshal(d.Detail, &reclaim))
		}
	}
	assert.Equal(t, rep.RunCount, deleted)
	assert.Equal(t, rep.CheckpointCount, checkpoints)
	assert.Positive(t, checkpoints)
	assert.Equal(t, rep.CheckpointBytes, bytes)
	require.NotNil(t, reclaim, "the pass reclaimed")
	assert.Len(t, reclaim["deletions"], 2, "the first of the pass's entries")
	assert.Equal(t, float64(8), reclaim["deletionCount"], "five runs and three runs' checkpoints")
}
