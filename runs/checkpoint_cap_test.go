package runs_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/checkpoint"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/journal"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// capped returns the default profile with a checkpoint cap, taking
// automatic checkpoints or not.
func capped(n int, auto bool) *runs.Profile {
	p := runs.DefaultProfile()
	p.MaxCheckpoints = n
	p.AutoCheckpoint = &auto
	return &p
}

// checkpointIDs lists the ids of the run's checkpoints, oldest first.
func (e *lifecycleEnv) checkpointIDs(runID string) []string {
	e.t.Helper()
	cps, err := e.st.Checkpoints.List(e.ctx, runID)
	require.NoError(e.t, err)
	ids := []string{}
	for _, c := range cps {
		ids = append(ids, c.ID)
	}
	return ids
}

// eventsAfter returns the run's events after seq.
func (e *lifecycleEnv) eventsAfter(runID string, seq int64) []journal.Event {
	e.t.Helper()
	evs, err := e.st.Journal.Page(e.ctx, runID, journal.PageQuery{AfterSeq: seq, Limit: journal.MaxLimit})
	require.NoError(e.t, err)
	return evs
}

// lastSeq is the seq of the run's last event.
func (e *lifecycleEnv) lastSeq(runID string) int64 {
	e.t.Helper()
	n, err := e.st.Journal.Last(e.ctx, nil, runID)
	require.NoError(e.t, err)
	return n
}

// changes is SQLite's count of rows inserted, updated and deleted on the
// store's one write connection since it opened: the difference across an
// operation is the rows that operation wrote.
func (e *lifecycleEnv) changes() int64 {
	e.t.Helper()
	var n int64
	require.NoError(e.t, e.st.DB.Update(e.ctx, func(tx *index.Tx) error {
		return tx.GetContext(e.ctx, &n, `SELECT total_changes()`)
	}))
	return n
}

func prunedPayload(t *testing.T, ev journal.Event) journal.Pruned {
	t.Helper()
	require.Equal(t, journal.CheckpointsPruned, ev.Type)
	var p journal.Pruned
	require.NoError(t, json.Unmarshal(ev.Payload, &p))
	return p
}

func TestProfileMaxCheckpoints(t *testing.T) {
	cases := []struct {
		name string
		max  int
		code wserr.Code // "" for OK
	}{
		{"OKNoCap", 0, ""},
		{"OKCap", 3, ""},
		{"ErrNegative", -1, wserr.InvalidArgument},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newLifecycleEnv(t)
			_, err := e.svc.CreateRun(e.ctx, runs.CreateRequest{
				Chat: runs.ChatKey{Kind: "character", StableChatID: fmt.Sprint("c", i)}, Profile: capped(tc.max, true)})
			if tc.code != "" {
				requireModelError(t, err, tc.code)
				assert.Zero(t, e.count("runs"), "a refused profile creates nothing")
				return
			}
			require.NoError(t, err)
			runsList, err := e.svc.Runs(e.ctx, runs.ListQuery{})
			require.NoError(t, err)
			require.Len(t, runsList, 1)
			assert.Equal(t, tc.max, runsList[0].Profile.MaxCheckpoints, "the cap is stored with the run")
			b, err := json.Marshal(runsList[0].Profile)
			require.NoError(t, err)
			if tc.max == 0 {
				assert.NotContains(t, string(b), "maxCheckpoints", "no cap is left out of the JSON")
			} else {
				assert.Contains(t, string(b), fmt.Sprintf(`"maxCheckpoints":%d`, tc.max))
			}
		})
	}
}

// TestCheckpointCapPrunesOldest: automatic checkpoints past the cap delete
// the oldest, one per checkpoint, each recorded by a checkpoints_pruned
// event right after the checkpoint_created event that crossed the cap.
func TestCheckpointCapPrunesOldest(t *testing.T) {
	for _, limit := range []int{1, 3} {
		t.Run(fmt.Sprint("Cap", limit), func(t *testing.T) {
			e := newLifecycleEnv(t)
			r := e.create("c1", runs.CreateRequest{Profile: capped(limit, true)})
			require.Equal(t, []string{"cp_000001"}, e.checkpointIDs(r.ID))
			for i := 2; i <= 6; i++ {
				since := e.lastSeq(r.ID)
				fi := e.write(r.ID, "output/main.md", fmt.Sprint("draft ", i))
				require.Equal(t, checkpoint.ID(int64(i)), fi.Checkpoint)

				var want []string
				for s := max(1, i-limit+1); s <= i; s++ {
					want = append(want, checkpoint.ID(int64(s)))
				}
				assert.Equal(t, want, e.checkpointIDs(r.ID), "the newest %d stay", limit)

				evs := e.eventsAfter(r.ID, since)
				types := []journal.Type{}
				for _, ev := range evs {
					types = append(types, ev.Type)
				}
				if i <= limit {
					assert.Equal(t, []journal.Type{journal.WorkspaceFileWritten, journal.CheckpointCreated}, types, "under the cap nothing is pruned")
					continue
				}
				require.Equal(t, []journal.Type{journal.WorkspaceFileWritten, journal.CheckpointCreated, journal.CheckpointsPruned}, types)
				assert.Equal(t, journal.Pruned{CheckpointIDs: []string{checkpoint.ID(int64(i - limit))}, CheckpointCount: 1, MaxCheckpoints: limit},
					prunedPayload(t, evs[2]))
			}
			head, err := e.svc.Run(e.ctx, r.ID)
			require.NoError(t, err)
			assert.Equal(t, int64(6), head.HeadCheckpoint)

			// The journal is append-only: every checkpoint_created stays.
			var created []string
			for _, ev := range e.eventsAfter(r.ID, 0) {
				if ev.Type == journal.CheckpointCreated {
					var p journal.CheckpointMade
					require.NoError(t, json.Unmarshal(ev.Payload, &p))
					created = append(created, p.CheckpointID)
				}
			}
			assert.Equal(t, []string{"cp_000001", "cp_000002", "cp_000003", "cp_000004", "cp_000005", "cp_000006"}, created)
		})
	}
}

// TestCheckpointCapCostDoesNotGrow proves by counting rows that a
// checkpoint past the cap deletes exactly one checkpoint row, gives its
// child its parent and appends one event more than an uncapped
// checkpoint, and that this is the same at the 10th checkpoint as at the
// 200th: the cost follows what is pruned, not the run's history.
func TestCheckpointCapCostDoesNotGrow(t *testing.T) {
	const limit = 3
	e := newLifecycleEnv(t)
	free := e.create("c1", runs.CreateRequest{Profile: noAuto()})
	r := e.create("c2", runs.CreateRequest{Profile: capped(limit, false)})

	type cost struct {
		Changes     int64 // rows inserted, updated or deleted
		Events      int   // events appended
		Checkpoints int   // checkpoint rows of the run afterwards
		Pruned      []string
	}
	measure := func(runID string) cost {
		before, since := e.changes(), e.lastSeq(runID)
		_, err := e.svc.Checkpoint(e.ctx, runID, "step")
		require.NoError(t, err)
		c := cost{Changes: e.changes() - before, Checkpoints: len(e.checkpointIDs(runID))}
		evs := e.eventsAfter(runID, since)
		c.Events = len(evs)
		if len(evs) == 2 {
			c.Pruned = prunedPayload(t, evs[1]).CheckpointIDs
		}
		return c
	}

	uncapped := measure(free.ID)
	costs := map[int]cost{}
	for n := 1; n <= 200; n++ {
		c := measure(r.ID)
		if n == 10 || n == 200 {
			costs[n] = c
		}
	}
	assert.Equal(t, cost{
		Changes:     uncapped.Changes + 5, // the deleted row, its child's parent, the checkpoints_pruned event, the deletion-log row and its root as a gc candidate
		Events:      uncapped.Events + 1,
		Checkpoints: limit,
		Pruned:      []string{checkpoint.ID(10 - limit)},
	}, costs[10])
	assert.Equal(t, cost{
		Changes:     uncapped.Changes + 5,
		Events:      uncapped.Events + 1,
		Checkpoints: limit,
		Pruned:      []string{checkpoint.ID(200 - limit)},
	}, costs[200])
	assert.Equal(t, limit+1, e.count("checkpoints"), "the capped run's %d and the uncapped run's one", limit)
	assert.Equal(t, []string{"cp_000198", "cp_000199", "cp_000200"}, e.checkpointIDs(r.ID))
}

// TestCheckpointCapKeepsCommitPins: a checkpoint a commit was assembled
// from is never pruned; the oldest unpinned ones go instead, and when pins
// alone exceed the cap the run stays above it.
func TestCheckpointCapKeepsCommitPins(t *testing.T) {
	e := newLifecycleEnv(t)
	r := e.create("c1", runs.CreateRequest{Profile: capped(2, false)})
	e.write(r.ID, "output/main.md", "first")
	c1, err := e.svc.Commit(e.ctx, r.ID, &recordingSink{}, runs.CommitOptions{})
	require.NoError(t, err)
	assert.Equal(t, "cp_000001", c1.CheckpointID, "no automatic checkpoints: the commit's is the first")

	for range 3 {
		_, err := e.svc.Checkpoint(e.ctx, r.ID, "step")
		require.NoError(t, err)
	}
	assert.Equal(t, []string{"cp_000001", "cp_000004"}, e.checkpointIDs(r.ID), "the pinned one stays, the oldest unpinned go")

	e.write(r.ID, "output/main.md", "second")
	c2, err := e.svc.Commit(e.ctx, r.ID, &recordingSink{}, runs.CommitOptions{})
	require.NoError(t, err)
	assert.Equal(t, "cp_000005", c2.CheckpointID)
	assert.Equal(t, []string{"cp_000001", "cp_000005"}, e.checkpointIDs(r.ID))

	since := e.lastSeq(r.ID)
	cp, err := e.svc.Checkpoint(e.ctx, r.ID, "step")
	require.NoError(t, err)
	assert.Equal(t, []string{"cp_000001", "cp_000005", "cp_000006"}, e.checkpointIDs(r.ID),
		"two pins and the new checkpoint: above the cap of 2 rather than a pin deleted")
	evs := e.eventsAfter(r.ID, since)
	require.Len(t, evs, 1, "nothing pruned, nothing recorded")
	assert.Equal(t, journal.CheckpointCreated, evs[0].Type)

	_, err = e.svc.Checkpoint(e.ctx, r.ID, "step")
	require.NoError(t, err)
	assert.Equal(t, []string{"cp_000001", "cp_000005", "cp_000007"}, e.checkpointIDs(r.ID), "the newest unpinned one before goes")
	assert.Equal(t, []string{checkpoint.ID(cp.Seq)}, prunedPayload(t, e.eventsAfter(r.ID, e.lastSeq(r.ID)-1)[0]).CheckpointIDs)

	_, err = e.svc.RollbackCommit(e.ctx, r.ID, 1, &recordingSink{}, false)
	require.NoError(t, err, "a pinned checkpoint is still there to roll the commit back to")
}

// TestPrunedCheckpointIsNotFound: every way of reaching a pruned
// checkpoint fails as for one that never existed.
func TestPrunedCheckpointIsNotFound(t *testing.T) {
	e := newLifecycleEnv(t)
	r := e.create("c1", runs.CreateRequest{Profile: capped(1, true)})
	e.write(r.ID, "output/main.md", "v2")
	require.Equal(t, []string{"cp_000002"}, e.checkpointIDs(r.ID))

	cases := []struct {
		name string
		do   func() error
	}{
		{"Get", func() error { _, err := e.st.Checkpoints.Get(e.ctx, nil, r.ID, 1); return err }},
		{"View", func() error { _, err := e.st.Checkpoints.View(e.ctx, r.ID, 1); return err }},
		{"Read", func() error {
			_, err := e.svc.WorkspaceAt(r.ID, 1, runs.HostScope).Read(e.ctx, vfs.MustPath("input/persist_snapshot.json"), vfs.ReadOptions{})
			return err
		}},
		{"DiffFrom", func() error { _, err := e.svc.Diff(e.ctx, r.ID, 1, 0, runs.DiffOptions{}); return err }},
		{"DiffTo", func() error { _, err := e.svc.Diff(e.ctx, r.ID, 2, 1, runs.DiffOptions{}); return err }},
		{"Rollback", func() error { _, err := e.svc.Rollback(e.ctx, r.ID, 1, runs.RollbackOptions{}); return err }},
	}
	for _, tc := range cases {
		t.Run("Err"+tc.name, func(t *testing.T) {
			err := tc.do()
			require.Equal(t, wserr.CheckpointNotFound, wserr.CodeOf(err), "error: %v", err)
		})
	}
	assert.Equal(t, "v2", e.read(e.svc.WorkspaceAt(r.ID, 2, runs.ModelScope), "output/main.md"), "the kept one reads")
	got, err := e.svc.Run(e.ctx, r.ID)
	require.NoError(t, err)
	assert.Equal(t, int64(2), got.HeadCheckpoint, "a refused rollback moves nothing")
}

// TestCheckpointCapAfterRollback: after a rollback, the checkpoints of the
// branch rolled away from go before the one the run went back to, which
// the live workspace descends from; once none is left off that line, the
// oldest on it goes.
func TestCheckpointCapAfterRollback(t *testing.T) {
	e := newLifecycleEnv(t)
	r := e.create("c1", runs.CreateRequest{Profile: capped(3, true)})
	for i := 2; i <= 5; i++ {
		e.write(r.ID, "output/main.md", fmt.Sprint("draft ", i))
	}
	require.Equal(t, []string{"cp_000003", "cp_000004", "cp_000005"}, e.checkpointIDs(r.ID))
	_, err := e.svc.Rollback(e.ctx, r.ID, 3, runs.RollbackOptions{})
	require.NoError(t, err)

	steps := []struct {
		write string
		want  []string
	}{
		{"branch 1", []string{"cp_000003", "cp_000005", "cp_000006"}}, // cp 4, off the line, goes first
		{"branch 2", []string{"cp_000003", "cp_000006", "cp_000007"}}, // then cp 5
		{"branch 3", []string{"cp_000006", "cp_000007", "cp_000008"}}, // then the oldest on the line
	}
	for _, s := range steps {
		e.write(r.ID, "output/main.md", s.write)
		assert.Equal(t, s.want, e.checkpointIDs(r.ID), "after %q", s.write)
	}
}

// TestCheckpointCapLineRunsPastAPrunedParent: a checkpoint whose parent
// was pruned takes the parent's parent, so the line from the live
// workspace back to the checkpoints it descends from is kept whole, and
// the abandoned branch goes first even then.
func TestCheckpointCapLineRunsPastAPrunedParent(t *testing.T) {
	e := newLifecycleEnv(t)
	r := e.create("c1", runs.CreateRequest{Profile: capped(3, true)})
	e.write(r.ID, "output/main.md", "two")
	e.write(r.ID, "output/main.md", "three")
	require.Equal(t, []string{"cp_000001", "cp_000002", "cp_000003"}, e.checkpointIDs(r.ID))
	rollback := func(seq int64) {
		_, err := e.svc.Rollback(e.ctx, r.ID, seq, runs.RollbackOptions{})
		require.NoError(t, err)
	}
	rollback(1)
	e.write(r.ID, "output/main.md", "four") // cp 4 on 1: cp 2 is off its line
	require.Equal(t, []string{"cp_000001", "cp_000003", "cp_000004"}, e.checkpointIDs(r.ID))
	cp3, err := e.st.Checkpoints.Get(e.ctx, nil, r.ID, 3)
	require.NoError(t, err)
	assert.Equal(t, "cp_000001", cp3.Parent, "cp 3 descends from cp 1 once cp 2 is gone")

	rollback(3)
	e.write(r.ID, "output/main.md", "five") // cp 5 on 3, on 1: cp 4 is off the line
	assert.Equal(t, []string{"cp_000001", "cp_000003", "cp_000005"}, e.checkpointIDs(r.ID))
}

// TestCheckpointByteCapCostDoesNotGrow proves by counting rows that a
// checkpoint past the byte cap deletes exactly one checkpoint row, hands
// its parent to its child, and appends one event and one deletion-log row
// more than an uncapped checkpoint, and that this is the same at the 10th
// checkpoint as at the 200th: the byte cap's cost follows what it prunes,
// not the run's history (TestPruneBytesQueriesUseTheKeys, in checkpoint,
// holds the rows it reads to the keys).
func TestCheckpointByteCapCostDoesNotGrow(t *testing.T) {
	// Each step replaces output/a.bin with 1000 incompressible bytes,
	// stored raw: every checkpoint makes exactly 1000 stored bytes dead.
	const size, limit = 1000, 2500
	e := newLifecycleEnv(t)
	free := e.create("c1", runs.CreateRequest{Profile: noAuto()})
	prof := noAuto()
	prof.MaxCheckpointBytes = limit
	r := e.create("c2", runs.CreateRequest{Profile: prof})
	step := 0
	content := func() string {
		step++
		rng := rand.New(rand.NewPCG(uint64(step), 3))
		b := make([]byte, size)
		for i := range b {
			b[i] = byte(rng.UintN(256))
		}
		return string(b)
	}

	type cost struct {
		Changes     int64 // rows inserted, updated or deleted
		Events      int   // events appended
		Checkpoints int   // checkpoint rows of the run afterwards
		Pruned      []string
	}
	measure := func(runID string) cost {
		e.write(runID, "output/a.bin", content())
		// the re-encoding the write queued, so that it is not counted
		_, err := e.st.Blobs.Reencode(e.ctx, 0)
		require.NoError(t, err)
		before, since := e.changes(), e.lastSeq(runID)
		_, err = e.svc.Checkpoint(e.ctx, runID, "step")
		require.NoError(t, err)
		c := cost{Changes: e.changes() - before, Checkpoints: len(e.checkpointIDs(runID))}
		evs := e.eventsAfter(runID, since)
		c.Events = len(evs)
		if len(evs) == 2 {
			c.Pruned = prunedPayload(t, evs[1]).CheckpointIDs
		}
		return c
	}

	measure(free.ID)
	uncapped := measure(free.ID) // a checkpoint with a parent to diff against
	costs := map[int]cost{}
	for n := 1; n <= 200; n++ {
		c := measure(r.ID)
		if n == 10 || n == 200 {
			costs[n] = c
		}
	}
	// Retained after checkpoint n is 1000 × (checkpoints kept − 1): the
	// cap of 2500 keeps three.
	const kept = 3
	for _, n := range []int{10, 200} {
		assert.Equal(t, cost{
			Changes:     uncapped.Changes + 5, // the deleted row, its child's parent, the checkpoints_pruned event, the deletion-log row and its root as a gc candidate
			Events:      uncapped.Events + 1,
			Checkpoints: kept,
			Pruned:      []string{checkpoint.ID(int64(n - kept))},
		}, costs[n], "checkpoint %d", n)
	}
	cps, err := e.st.Checkpoints.List(e.ctx, r.ID)
	require.NoError(t, err)
	assert.Empty(t, cps[0].Parent, "the oldest kept took its pruned parent's parent: none")
	assert.Equal(t, cps[0].ID, cps[1].Parent)
}

// TestUnchangedWorkspaceTakesNoCheckpoint: a change that leaves the
// workspace as it was (the same bytes written again, an empty append, an
// apply of the same content) is journaled but takes no automatic
// checkpoint, so it cannot push a capped run's real history out.
func TestUnchangedWorkspaceTakesNoCheckpoint(t *testing.T) {
	e := newLifecycleEnv(t)
	r := e.create("c1", runs.CreateRequest{Profile: capped(3, true)})
	e.write(r.ID, "output/a.md", "v1")
	fi := e.write(r.ID, "output/a.md", "v2")
	require.Equal(t, "cp_000003", fi.Checkpoint)
	ws := e.svc.Workspace(r.ID, runs.ModelScope)
	p := vfs.MustPath("output/a.md")
	unchanged := map[string]func() (string, error){
		"Write": func() (string, error) {
			fi, err := ws.Write(e.ctx, p, []byte("v2"), vfs.WriteOptions{})
			return fi.Checkpoint, err
		},
		"EmptyAppend": func() (string, error) {
			fi, err := ws.Write(e.ctx, p, nil, vfs.WriteOptions{Mode: vfs.Append})
			return fi.Checkpoint, err
		},
		"Apply": func() (string, error) {
			infos, err := ws.Apply(e.ctx, []runs.Edit{{Path: p, Content: []byte("v2")}})
			if err != nil {
				return "", err
			}
			return infos[0].Checkpoint, nil
		},
	}
	for name, change := range unchanged {
		since := e.lastSeq(r.ID)
		cp, err := change()
		require.NoError(t, err, name)
		assert.Empty(t, cp, "%s: no checkpoint", name)
		assert.Equal(t, []string{"cp_000001", "cp_000002", "cp_000003"}, e.checkpointIDs(r.ID), name)
		types := []journal.Type{}
		for _, ev := range e.eventsAfter(r.ID, since) {
			types = append(types, ev.Type)
		}
		assert.NotEmpty(t, types, "%s is journaled", name)
		assert.NotContains(t, types, journal.CheckpointCreated, name)
	}
	head, err := e.svc.Run(e.ctx, r.ID)
	require.NoError(t, err)
	assert.Equal(t, int64(3), head.HeadCheckpoint, "the head stays the last change's")

	fi = e.write(r.ID, "output/a.md", "v3")
	assert.Equal(t, "cp_000004", fi.Checkpoint, "a change takes the next")
}
