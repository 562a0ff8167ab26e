package runs_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/journal"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/wserr"
)

// TestCheckpointPruneIsBounded: a prune that deletes more of a run's
// checkpoints than it names (three here) names the first three, oldest
// first, and counts every one, in its answer (dry or not), its
// deletion-log entry and its checkpoints_pruned event, in the same number
// of bytes for 20 checkpoints as for 90; so does the entry and event of
// the byte cap pruning as a checkpoint is taken. A prune refused (an
// unknown chat) or failing (its event cannot be written) changes nothing.
func TestCheckpointPruneIsBounded(t *testing.T) {
	defer runs.SetPrunedCheckpointIDs(3)()
	first := []string{"cp_000001", "cp_000002", "cp_000003"}
	type sizes struct{ answer, dry, entry, event, capEntry, capEvent int }
	// entryAndEvent checks the run's last checkpoints entry and
	// checkpoints_pruned event after seq, and returns their bytes.
	entryAndEvent := func(e *lifecycleEnv, runID string, after int64, n int) (entry, event int) {
		t.Helper()
		ds, _, err := e.svc.Deletions(e.ctx, 0, 0)
		require.NoError(t, err)
		var det json.RawMessage
		for _, d := range ds {
			if d.Kind == runs.DeletedCheckpoints && d.RunID == runID {
				det = d.Detail
			}
		}
		require.NotNil(t, det)
		var got struct {
			IDs   []string `json:"checkpointIds"`
			Count int      `json:"checkpointCount"`
		}
		require.NoError(t, json.Unmarshal(det, &got))
		assert.Equal(t, first, got.IDs, "the entry names the first, oldest first")
		assert.Equal(t, n, got.Count, "the entry counts every one")
		var ev *journal.Event
		for _, x := range e.eventsAfter(runID, after) {
			if x.Type == journal.CheckpointsPruned {
				ev = &x
			}
		}
		require.NotNil(t, ev, "a checkpoints_pruned event")
		p := prunedPayload(t, *ev)
		assert.Equal(t, first, p.CheckpointIDs, "the event names the first, oldest first")
		assert.Equal(t, n, p.CheckpointCount, "the event counts every one")
		return len(det), len(ev.Payload)
	}
	prune := func(n int) sizes {
		var sz sizes
		e := newLifecycleEnv(t)
		// Two runs of n+1 checkpoints (the first, then one a write), each
		// of its own content, so the byte cap takes all but the newest.
		for _, runID := range []string{"run_p", "run_q"} {
			e.create(runID, runs.CreateRequest{RunID: runID})
			for i := range n {
				e.write(runID, "output/notes.md", fmt.Sprintf("version %d of the notes, long enough to be kept as it is", i))
			}
			require.Len(t, e.checkpointIDs(runID), n+1)
		}
		one := int64(1)
		require.NoError(t, e.svc.SetPolicy(e.ctx, runs.StoreScope, runs.Policy{MaxCheckpointBytesPerRun: &one}))
		unchanged := func(what string) {
			t.Helper()
			assert.Equal(t, 2*(n+1), e.count("checkpoints"), "%s deletes no checkpoint", what)
			assert.Zero(t, e.count("deletions"), "%s logs nothing", what)
		}

		_, err := e.svc.Prune(e.ctx, runs.PruneOptions{ChatID: "chat_unknown"})
		require.True(t, wserr.Is(err, wserr.NotFound), "%v", err)
		unchanged("a refused prune")

		f := e.withFaults(runs.Options{})
		f.failOnce(string(journal.CheckpointsPruned), errInjected)
		_, err = e.svc.Prune(e.ctx, runs.PruneOptions{})
		require.ErrorIs(t, err, errInjected)
		unchanged("a prune whose event fails")

		chatP := runs.ChatWorkspaceID(runs.ChatKey{Kind: "character", StableChatID: "run_p"})
		dry, err := e.svc.Prune(e.ctx, runs.PruneOptions{DryRun: true, ChatID: chatP})
		require.NoError(t, err)
		unchanged("a dry run")
		require.Len(t, dry.Checkpoints, 1)
		assert.Equal(t, first, dry.Checkpoints[0].CheckpointIDs)
		assert.Equal(t, n, dry.Checkpoints[0].CheckpointCount)
		b, err := json.Marshal(dry)
		require.NoError(t, err)
		sz.dry = len(b)

		// run_q: the cap prunes as the run takes a checkpoint (of a write).
		before := e.lastSeq("run_q")
		e.write("run_q", "output/notes.md", "the last version")
		assert.Len(t, e.checkpointIDs("run_q"), 1, "the cap keeps the new checkpoint only")
		sz.capEntry, sz.capEvent = entryAndEvent(e, "run_q", before, n+1)

		// run_p: a prune.
		before = e.lastSeq("run_p")
		rep, err := e.svc.Prune(e.ctx, runs.PruneOptions{})
		require.NoError(t, err)
		require.Len(t, rep.Checkpoints, 1)
		c := rep.Checkpoints[0]
		assert.Equal(t, "run_p", c.RunID)
		assert.Equal(t, first, c.CheckpointIDs, "the answer names the first, oldest first")
		assert.Equal(t, n, c.CheckpointCount, "the answer counts every one")
		assert.Equal(t, n, rep.CheckpointCount)
		assert.Len(t, e.checkpointIDs("run_p"), 1, "every checkpoint but the newest is deleted")
		b, err = json.Marshal(rep)
		require.NoError(t, err)
		sz.answer = len(b)
		sz.entry, sz.event = entryAndEvent(e, "run_p", before, n)
		return sz
	}
	small, large := prune(20), prune(90)
	t.Logf("bytes for 20 and 90 checkpoints pruned: %+v and %+v", small, large)
	assert.Equal(t, small, large, "nothing grows with the checkpoints pruned")
}
