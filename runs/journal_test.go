package runs_test

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/journal"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// allEvents reads a run's whole journal, page by page.
func allEvents(t testing.TB, e *wsEnv, runID string) []journal.Event {
	t.Helper()
	var out []journal.Event
	for {
		var after int64
		if len(out) > 0 {
			after = out[len(out)-1].Seq
		}
		page, err := e.st.Journal.Page(e.ctx, runID, journal.PageQuery{AfterSeq: after, Limit: journal.MaxLimit})
		require.NoError(t, err)
		if len(page) == 0 {
			return out
		}
		out = append(out, page...)
	}
}

// requireGapless fails unless events are seqs 1..len(events) in order.
func requireGapless(t testing.TB, events []journal.Event) {
	t.Helper()
	for i, ev := range events {
		require.EqualValues(t, i+1, ev.Seq, "seq %d is at position %d: a gap or a repeat", ev.Seq, i+1)
	}
}

// TestJournalPerOperation proves each workspace operation journals its
// event in the seed's vocabulary, followed by its checkpoint's, with
// gapless seqs, payloads that say what changed, and checkpoints that
// point at their events.
func TestJournalPerOperation(t *testing.T) {
	e := newWSEnv(t, runs.Options{})
	ctx := e.ctx
	P := vfs.MustPath
	e.newRun("run_a", runs.CreateRequest{})
	ws := e.model("run_a")

	v1 := e.write("run_a", "output/main.md", "hello world\n")
	v2, err := ws.Write(ctx, P("output/main.md"), []byte("!\n"), vfs.WriteOptions{Mode: vfs.Append})
	require.NoError(t, err)
	v3, err := ws.Patch(ctx, P("output/main.md"), "world", "there", vfs.PatchOptions{})
	require.NoError(t, err)
	require.NoError(t, ws.Remove(ctx, P("output/main.md")))
	_, err = ws.Patch(ctx, P("output/none.md"), "a", "b", vfs.PatchOptions{})
	requireModelError(t, err, wserr.FileNotFound) // failed operations journal nothing
	cp, err := e.svc.Checkpoint(ctx, "run_a", "before_commit")
	require.NoError(t, err)
	require.NoError(t, e.svc.SetStatus(ctx, "run_a", runs.Cancelled, "user stopped"))

	evs := allEvents(t, e, "run_a")
	requireGapless(t, evs)
	assert.Equal(t, []journal.Type{
		journal.RunCreated, journal.StatusChanged, journal.CheckpointCreated,
		journal.WorkspaceFileWritten, journal.CheckpointCreated,
		journal.WorkspaceFileWritten, journal.CheckpointCreated,
		journal.WorkspacePatchApplied, journal.CheckpointCreated,
		journal.WorkspaceFileDeleted, journal.CheckpointCreated,
		journal.CheckpointCreated,
		journal.StatusChanged, journal.RunCancelled,
	}, eventTypes(evs))
	for i := 1; i < len(evs); i++ {
		assert.True(t, evs[i].At.After(evs[i-1].At), "event times come from the injected clock, in order")
		assert.Equal(t, "run_a", evs[i].RunID)
	}

	decode := func(ev journal.Event, v any) {
		t.Helper()
		require.NoError(t, json.Unmarshal(ev.Payload, v), "%s payload %s", ev.Type, ev.Payload)
	}
	var w1, w2 journal.FileWritten
	decode(evs[3], &w1)
	assert.Equal(t, journal.FileWritten{Path: "output/main.md", Hash: v1.Hash.String(), Bytes: 12, Mode: "replace"}, w1)
	decode(evs[5], &w2)
	assert.Equal(t, journal.FileWritten{Path: "output/main.md", Hash: v2.Hash.String(), Bytes: 14, Mode: "append", PrevHash: v1.Hash.String()}, w2)
	var pa journal.PatchApplied
	decode(evs[7], &pa)
	assert.Equal(t, journal.PatchApplied{Path: "output/main.md", Hash: v3.Hash.String(), PrevHash: v2.Hash.String(), Replacements: 1}, pa)
	var del journal.FileDeleted
	decode(evs[9], &del)
	assert.Equal(t, journal.FileDeleted{Path: "output/main.md", PrevHash: v3.Hash.String()}, del)

	cps, err := e.st.Checkpoints.List(ctx, "run_a")
	require.NoError(t, err)
	require.Len(t, cps, 6)
	reasons := []string{"after_init", "after_workspace_write", "after_workspace_write", "after_workspace_patch", "after_workspace_delete", "before_commit"}
	for i, c := range cps {
		assert.Equal(t, reasons[i], c.Reason)
		assert.EqualValues(t, i+1, c.Seq)
		ev := evs[c.EventSeq-1]
		require.Equal(t, journal.CheckpointCreated, ev.Type, "checkpoint %s points at its event", c.ID)
		var made journal.CheckpointMade
		decode(ev, &made)
		assert.Equal(t, c.ID, made.CheckpointID)
		assert.Equal(t, c.Root.String(), made.Root)
		if i > 0 {
			assert.Equal(t, cps[i-1].ID, c.Parent, "each checkpoint descends from the one before")
		}
	}
	assert.Equal(t, cp.Seq, cps[5].Seq)

	t.Run("CheckpointsHoldEachVersion", func(t *testing.T) {
		for seq, want := range map[int64]string{2: "hello world\n", 3: "hello world\n!\n", 4: "hello there\n!\n"} {
			res, err := e.svc.WorkspaceAt("run_a", seq, runs.ModelScope).Read(ctx, P("output/main.md"), vfs.ReadOptions{})
			require.NoError(t, err)
			assert.Equal(t, want, res.Text, "checkpoint %d", seq)
			assert.Equal(t, cas.Sum([]byte(want)), res.Info.Hash)
			assert.False(t, res.Info.Writable, "a checkpoint view is read-only")
		}
		_, err := e.svc.WorkspaceAt("run_a", 5, runs.ModelScope).Stat(ctx, P("output/main.md"))
		requireModelError(t, err, wserr.FileNotFound)
	})
}

// TestJournalNoAutoCheckpoint proves a profile without automatic
// checkpoints journals the operations alone.
func TestJournalNoAutoCheckpoint(t *testing.T) {
	e := newWSEnv(t, runs.Options{})
	off := false
	e.newRun("run_a", runs.CreateRequest{Profile: &runs.Profile{AutoCheckpoint: &off}})
	e.write("run_a", "output/main.md", "x")
	e.write("run_a", "output/main.md", "y")
	evs := allEvents(t, e, "run_a")
	requireGapless(t, evs)
	assert.Equal(t, []journal.Type{journal.RunCreated, journal.StatusChanged, journal.WorkspaceFileWritten, journal.WorkspaceFileWritten}, eventTypes(evs))
	assert.Zero(t, e.run("run_a").HeadCheckpoint)
}

// TestJournalConcurrentRuns proves journals stay gapless when 8 runs are
// written at once: every write succeeds (no store.busy), and each run's
// seqs are 1..N with N the events its operations made.
func TestJournalConcurrentRuns(t *testing.T) {
	e := newWSEnv(t, runs.Options{})
	const runsN, writes = 8, 50
	var wg sync.WaitGroup
	errs := make(chan error, runsN*(writes+1))
	for r := range runsN {
		wg.Go(func() {
			id := fmt.Sprintf("run_%d", r)
			if _, err := e.svc.CreateRun(e.ctx, runs.CreateRequest{Chat: testChat, RunID: id}); err != nil {
				errs <- err
				return
			}
			ws := e.model(id)
			for i := range writes {
				p := vfs.MustPath(fmt.Sprintf("output/part%02d.md", i%7))
				_, err := ws.Write(e.ctx, p, fmt.Appendf(nil, "run %d write %d\n", r, i), vfs.WriteOptions{Mode: vfs.Append})
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
		assert.False(t, wserr.Is(err, wserr.Busy))
	}
	for r := range runsN {
		id := fmt.Sprintf("run_%d", r)
		evs := allEvents(t, e, id)
		requireGapless(t, evs)
		// run_created, status_changed, checkpoint_created, then an event
		// and a checkpoint per write.
		assert.Len(t, evs, 3+2*writes, id)
		n, err := e.st.Checkpoints.Count(e.ctx, nil, id)
		require.NoError(t, err)
		assert.EqualValues(t, 1+writes, n, id)
	}
	assert.Equal(t, runsN*(3+2*writes), e.rows("events"))
}
