package maint_test

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/checkpoint"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/maint"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// damagedRoots opens a store with roots of every kind: two chats with
// runs and checkpoints, one run with records, actor versions, the
// checkpoints of a run whose row is gone, and a run whose chat's row is
// gone (as only damage leaves them). Each run holds a file no other root
// does.
func damagedRoots(t *testing.T) *wsstore.Store {
	t.Helper()
	s := storetest.OpenStore(t)
	ctx := context.Background()
	for _, r := range [][2]string{{"chat-2", "run_b"}, {"chat-1", "run_c"}, {"chat-1", "run_a"}, {"chat-3", "run_d"}, {"chat-1", "run_gone"}} {
		createRun(t, s, r[0], r[1])
		write(t, s, r[1], "output/own.md", "only "+r[1]+"\n")
	}
	write(t, s, "run_a", "output/more.md", "a second checkpoint\n")
	for _, a := range []string{"bob", "alice", "bob"} {
		_, err := s.Actors.Upload(ctx, a, "notes.md", strings.NewReader("notes of "+a))
		require.NoError(t, err)
	}
	run, err := s.Runs.Run(ctx, "run_c")
	require.NoError(t, err)
	chat, err := s.Runs.Run(ctx, "run_d")
	require.NoError(t, err)
	require.NoError(t, s.DB.Exec(ctx, `PRAGMA foreign_keys = OFF`))
	require.NoError(t, s.DB.Update(ctx, func(tx *index.Tx) error {
		for _, q := range []struct {
			sql  string
			args []any
		}{
			{`UPDATE runs SET records = ? WHERE id = 'run_a'`, []any{run.Root}},
			{`DELETE FROM runs WHERE id = 'run_gone'`, nil},
			{`DELETE FROM chats WHERE id = ?`, []any{chat.ChatID}},
		} {
			if _, err := tx.ExecContext(ctx, q.sql, q.args...); err != nil {
				return err
			}
		}
		return nil
	}))
	require.NoError(t, s.DB.Exec(ctx, `PRAGMA foreign_keys = ON`))
	// The damage goes before the store's own check at the end.
	t.Cleanup(func() {
		require.NoError(t, s.DB.Update(ctx, func(tx *index.Tx) error {
			for _, q := range []string{
				`DELETE FROM checkpoints WHERE run_id IN ('run_gone', 'run_d')`,
				`DELETE FROM events WHERE run_id IN ('run_gone', 'run_d')`,
				`DELETE FROM runs WHERE id = 'run_d'`,
			} {
				if _, err := tx.ExecContext(ctx, q); err != nil {
					return err
				}
			}
			return nil
		}))
	})
	return s
}

func rootNames(t *testing.T, s *wsstore.Store) []maint.RootName {
	t.Helper()
	var out []maint.RootName
	require.NoError(t, s.DB.View(context.Background(), func(tx *index.Tx) error {
		var err error
		out, err = newMaintainer(s).RootNames(context.Background(), tx)
		return err
	}))
	return out
}

// TestRootsComeInWalkOrder: the roots come ordered by chat, run, kind,
// actor and seq, the order gc, fsck and du walk them in (and so which
// root their messages name first), a checkpoint in its run's chat, or in
// none when its run is gone; and the roots of one owner (a run, a chat's
// persist layer, a gone run's checkpoints, the actor spaces) come
// together, under one owner number of their own.
func TestRootsComeInWalkOrder(t *testing.T) {
	s := damagedRoots(t)
	got := rootNames(t, s)
	want := slices.Clone(got)
	slices.SortStableFunc(want, func(a, b maint.RootName) int {
		return cmp.Or(strings.Compare(a.Chat, b.Chat), strings.Compare(a.Run, b.Run), strings.Compare(a.Kind, b.Kind),
			strings.Compare(a.Actor, b.Actor), cmp.Compare(a.Seq, b.Seq))
	})
	assert.Equal(t, want, got)

	kinds := map[string]int{}
	owners := map[int64]bool{}
	for i, r := range got {
		kinds[r.Kind]++
		if r.Run == "run_gone" {
			assert.Empty(t, r.Chat, "a checkpoint of a run that is gone has no chat")
		}
		if i > 0 {
			same := r.Chat == got[i-1].Chat && r.Run == got[i-1].Run
			assert.Equal(t, same, r.Owner == got[i-1].Owner, "%s and %s", got[i-1].Name, r.Name)
			if !same {
				assert.False(t, owners[r.Owner], "%s: an owner's roots come together", r.Name)
			}
		}
		owners[r.Owner] = true
	}
	assert.Equal(t, 4, kinds["actor"], "each space's live root and its one version")
	assert.Equal(t, 2, kinds["chat"], "chat-3's row is gone")
	assert.Equal(t, 4, kinds["run"])
	assert.Equal(t, 4, kinds["base"])
	assert.Equal(t, 1, kinds["records"])
	assert.Contains(t, got, maint.RootName{Run: "run_gone", Kind: "checkpoint", Seq: 1, Name: "checkpoint run_gone/" + checkpoint.ID(1), Owner: got[slices.IndexFunc(got, func(r maint.RootName) bool { return r.Run == "run_gone" })].Owner})
}

// TestGCKeepsWhatDamagedRowsHold: gc keeps what the checkpoints of a run
// whose row is gone and a run whose chat's row is gone hold, as every
// other root's: nothing any root reaches goes missing.
func TestGCKeepsWhatDamagedRowsHold(t *testing.T) {
	s := damagedRoots(t)
	ctx := context.Background()
	later := func() time.Time { return time.Now().Add(time.Hour) }
	m := newMaintainer(s)
	_, err := m.GC(ctx, maint.GCOptions{Grace: -1, Now: later})
	require.NoError(t, err)
	rep, err := m.Fsck(ctx, nil)
	require.NoError(t, err)
	for _, p := range rep.Problems {
		assert.NotContains(t, p.Detail, "is missing", "%v", p)
	}
	for _, content := range []string{"only run_gone\n", "only run_d\n", "only run_c\n"} {
		ok := false
		require.NoError(t, s.DB.View(ctx, func(tx *index.Tx) error {
			return tx.GetContext(ctx, &ok, `SELECT EXISTS (SELECT 1 FROM blobs WHERE hash = ?)`, cas.Sum([]byte(content)))
		}))
		assert.True(t, ok, "%q is kept", content)
	}
}

// failingCheckpointRoots fails the read of a run's checkpoint roots once
// fn has taken one root, on the call failAt counts to, as a read error
// part way through the roots would.
type failingCheckpointRoots struct {
	maint.CheckpointRoots
	calls  *int
	failAt int
}

var errRootRead = errors.New("root read failed")

func (f failingCheckpointRoots) EachRootOf(ctx context.Context, tx *index.Tx, runID string, fn func(int64, cas.Hash) error) error {
	*f.calls++
	if *f.calls != f.failAt {
		return f.CheckpointRoots.EachRootOf(ctx, tx, runID, fn)
	}
	return f.CheckpointRoots.EachRootOf(ctx, tx, runID, func(seq int64, root cas.Hash) error {
		if err := fn(seq, root); err != nil {
			return err
		}
		return errRootRead
	})
}

// TestGCRootReadFailureDeletesNothing: a read of the roots that fails part
// way, in mark or in sweep, fails gc with its error, and nothing is
// deleted.
func TestGCRootReadFailureDeletesNothing(t *testing.T) {
	s := twoRunsOneGone(t)
	ctx := context.Background()
	later := func() time.Time { return time.Now().Add(time.Hour) }
	calls := 0
	p := parts(s)
	p.Checkpoints = failingCheckpointRoots{CheckpointRoots: p.Checkpoints, calls: &calls}
	plan, err := maint.New(p).GC(ctx, maint.GCOptions{DryRun: true, Grace: -1, Now: later})
	require.NoError(t, err)
	require.Positive(t, plan.Freed.Blobs)
	mark := calls
	require.Positive(t, mark)
	for name, at := range map[string]int{"Mark": 1, "Sweep": mark + 1} {
		t.Run(name, func(t *testing.T) {
			calls = 0
			p.Checkpoints = failingCheckpointRoots{CheckpointRoots: s.Checkpoints, calls: &calls, failAt: at}
			_, err := maint.New(p).GC(ctx, maint.GCOptions{Grace: -1, Now: later})
			require.ErrorIs(t, err, errRootRead)
			again, err := newMaintainer(s).GC(ctx, maint.GCOptions{DryRun: true, Grace: -1, Now: later})
			require.NoError(t, err)
			assert.Equal(t, plan, again, "nothing was deleted")
		})
	}
}

// shortCheckpointRoots leaves out every checkpoint of run runID when
// its checkpoint roots are read, as a read through a damaged index that
// hides rows would.
type shortCheckpointRoots struct {
	maint.CheckpointRoots
	runID string
}

func (s shortCheckpointRoots) EachRootOf(ctx context.Context, tx *index.Tx, runID string, fn func(int64, cas.Hash) error) error {
	if runID == s.runID {
		return nil
	}
	return s.CheckpointRoots.EachRootOf(ctx, tx, runID, fn)
}

// TestGCRefusesWhenCheckpointsHide: a run's checkpoints read short of
// what the table holds (a damaged index can hide rows) fail gc, du, stats
// and fsck's references with store.corrupt, and gc deletes nothing: a
// checkpoint left out holds the only copy of a file.
func TestGCRefusesWhenCheckpointsHide(t *testing.T) {
	s := storetest.OpenStore(t)
	ctx := context.Background()
	createRun(t, s, "chat-1", "run_a")
	write(t, s, "run_a", "output/old.md", "only the first checkpoint holds this\n")
	require.NoError(t, s.Runs.Workspace("run_a", runs.HostScope).Remove(ctx, vfs.MustPath("output/old.md")))
	later := func() time.Time { return time.Now().Add(time.Hour) }
	plan, err := newMaintainer(s).GC(ctx, maint.GCOptions{DryRun: true, Grace: -1, Now: later})
	require.NoError(t, err)

	p := parts(s)
	p.Checkpoints = shortCheckpointRoots{CheckpointRoots: p.Checkpoints, runID: "run_a"}
	m := maint.New(p)
	_, err = m.GC(ctx, maint.GCOptions{Grace: -1, Now: later})
	assert.True(t, wserr.Is(err, wserr.Corrupt), "%v", err)
	_, err = m.Stats(ctx)
	assert.True(t, wserr.Is(err, wserr.Corrupt), "%v", err)
	_, err = collectDU(ctx, m)
	assert.True(t, wserr.Is(err, wserr.Corrupt), "%v", err)
	rep, err := m.Fsck(ctx, nil)
	require.NoError(t, err)
	assert.NotEmpty(t, rep.Problems)

	again, err := newMaintainer(s).GC(ctx, maint.GCOptions{DryRun: true, Grace: -1, Now: later})
	require.NoError(t, err)
	assert.Equal(t, plan, again, "nothing was deleted")
	rep, err = newMaintainer(s).Fsck(ctx, nil)
	require.NoError(t, err)
	assert.True(t, rep.OK(), "%v", rep.Problems)
}
