package wsstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/remote"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/wserr"
)

var chatOne = runs.ChatKey{Kind: "character", StableChatID: "chat-1"}

// holds reports whether st holds run id.
func holds(t *testing.T, st *wsstore.Store, id string) bool {
	_, err := st.Runs.Run(context.Background(), id)
	if wserr.CodeOf(err) == wserr.RunNotFound {
		return false
	}
	require.NoError(t, err)
	return true
}

// The tests below follow one run id through two runs: the first deleted,
// a second created later under the same id. Before tombstones were kept
// per run (migration 00029), one tombstone per id hid or replaced the
// other's, and each of these ended with a deleted run kept somewhere,
// silently, or a new run lost on a device.

// TestSyncSecondRunDeleted: the second run, shorter than the first, is
// deleted by B; a device that reads B's segment before A's (by device
// ids), offline meanwhile, deletes it too, as does a new device.
func TestSyncSecondRunDeleted(t *testing.T) {
	_, open := fakeTier(t)
	ctx := context.Background()
	s := storesByDevice(t, open, 3)
	b, c, a := s[0], s[1], s[2] // B's and C's ids sort before A's
	smallRuns(t, a, "chat-1", "r", 1)
	for i := range 5 {
		edit(t, a, "r-00", fmt.Sprintf("x%d.md", i), "first life\n")
	}
	syncRounds(t, 1, a, b, c)
	_, err := a.Runs.CancelAndDeleteRun(ctx, "r-00")
	require.NoError(t, err)
	syncRounds(t, 1, a, b, c)
	_, err = a.Runs.CreateRun(ctx, runs.CreateRequest{Chat: chatOne, RunID: "r-00"})
	require.NoError(t, err)
	syncOK(t, a)
	syncOK(t, b) // C is offline from here
	require.True(t, holds(t, b, "r-00"))
	_, err = b.Runs.CancelAndDeleteRun(ctx, "r-00")
	require.NoError(t, err)
	assert.Equal(t, []string{"run r-00"}, syncOK(t, b).Tombstones, "B publishes its deletion")
	e := open()
	syncOK(t, c)
	known, err := c.Remote.FindTombstones(ctx, c.DB, "run", "r-00")
	require.NoError(t, err)
	assert.Len(t, known, 2, "C keeps a tombstone of each run the id named")
	all := map[string]*wsstore.Store{"A": a, "B": b, "C": c, "E": e}
	for range 3 {
		for _, n := range []string{"C", "E", "A", "B"} {
			assert.Empty(t, syncOK(t, all[n]).Conflicts, "%s names no conflict", n)
		}
	}
	for _, n := range []string{"A", "B", "C", "E"} {
		assert.False(t, holds(t, all[n], "r-00"), "%s: B deleted the second r-00", n)
	}
}

// TestSyncCreatedAgainThenBase: a device offline since the first run
// reads the base the re-creating device wrote after the second.
func TestSyncCreatedAgainThenBase(t *testing.T) {
	_, open := fakeTier(t)
	ctx := context.Background()
	a, d := open(), open()
	smallRuns(t, a, "chat-1", "r", 2)
	edit(t, a, "r-00", "life.md", "first life\n")
	syncRounds(t, 1, a, d)
	_, err := a.Runs.CancelAndDeleteRun(ctx, "r-00")
	require.NoError(t, err)
	_, err = a.Runs.CreateRun(ctx, runs.CreateRequest{Chat: chatOne, RunID: "r-00"})
	require.NoError(t, err)
	edit(t, a, "r-00", "life.md", "second life\n")
	syncOK(t, a)
	_, err = a.SyncWith(ctx, wsstore.SyncOptions{Base: true})
	require.NoError(t, err)
	for i := range 2 {
		rep := syncOK(t, d)
		assert.Empty(t, rep.Conflicts, "round %d: D names no conflict", i)
	}
	assert.Equal(t, "second life\n", secondLife(t, d, "r-00"), "D holds the new run")
}

// TestSyncCreatedElsewhereThenBase: C creates a run under the id of A's
// deletion, then writes a base; D, offline since the first run, reads
// C's base before A's segments (ids sort so), and takes the new run in
// the old one's place with no conflict.
func TestSyncCreatedElsewhereThenBase(t *testing.T) {
	_, open := fakeTier(t)
	ctx := context.Background()
	s := storesByDevice(t, open, 3)
	c, d, a := s[0], s[1], s[2]
	smallRuns(t, a, "chat-1", "r", 2)
	edit(t, a, "r-00", "life.md", "first life\n")
	syncRounds(t, 1, a, c, d)
	_, err := a.Runs.CancelAndDeleteRun(ctx, "r-00")
	require.NoError(t, err)
	syncRounds(t, 1, a, c)
	_, err = c.Runs.CreateRun(ctx, runs.CreateRequest{Chat: chatOne, RunID: "r-00"})
	require.NoError(t, err)
	edit(t, c, "r-00", "life.md", "second life\n")
	syncOK(t, c)
	_, err = c.SyncWith(ctx, wsstore.SyncOptions{Base: true})
	require.NoError(t, err)
	all := map[string]*wsstore.Store{"A": a, "C": c, "D": d}
	for i := range 3 {
		for _, n := range []string{"D", "A", "C"} {
			rep := syncOK(t, all[n])
			assert.Empty(t, rep.Conflicts, "round %d: %s names no conflict", i, n)
		}
	}
	for n, st := range all {
		assert.Equal(t, "second life\n", secondLife(t, st, "r-00"), "%s holds the new run", n)
	}
}

// TestSyncLongerSecondRunDeleted: as TestSyncSecondRunDeleted, the second
// run longer than the first: a segment's tombstone of the first run does
// not hide the known deletion of the second from a new device.
func TestSyncLongerSecondRunDeleted(t *testing.T) {
	_, open := fakeTier(t)
	ctx := context.Background()
	s := storesByDevice(t, open, 2)
	b, a := s[0], s[1]
	smallRuns(t, a, "chat-1", "r", 1)
	syncRounds(t, 1, a, b)
	_, err := a.Runs.CancelAndDeleteRun(ctx, "r-00")
	require.NoError(t, err)
	syncRounds(t, 1, a, b)
	_, err = a.Runs.CreateRun(ctx, runs.CreateRequest{Chat: chatOne, RunID: "r-00"})
	require.NoError(t, err)
	for i := range 8 {
		edit(t, a, "r-00", fmt.Sprintf("x%d.md", i), "second life\n")
	}
	syncRounds(t, 1, a, b)
	_, err = b.Runs.CancelAndDeleteRun(ctx, "r-00")
	require.NoError(t, err)
	syncRounds(t, 2, b, a)
	require.False(t, holds(t, a, "r-00"))
	e := open()
	rep := syncOK(t, e)
	assert.Empty(t, rep.Conflicts)
	assert.False(t, holds(t, e, "r-00"), "a new device does not get back the run B deleted")
}

// TestSyncFirstRunDeletionInLaterBases: A deletes a run and creates it
// again (longer); B deletes the new one. A's later base still carries
// A's deletion of the first, so D, offline since the first, deletes it.
func TestSyncFirstRunDeletionInLaterBases(t *testing.T) {
	_, open := fakeTier(t)
	ctx := context.Background()
	a, b, d := open(), open(), open()
	smallRuns(t, a, "chat-1", "r", 2)
	syncRounds(t, 1, a, b, d)
	_, err := a.Runs.CancelAndDeleteRun(ctx, "r-00")
	require.NoError(t, err)
	_, err = a.Runs.CreateRun(ctx, runs.CreateRequest{Chat: chatOne, RunID: "r-00"})
	require.NoError(t, err)
	for i := range 8 {
		edit(t, a, "r-00", fmt.Sprintf("x%d.md", i), "second life\n")
	}
	syncRounds(t, 1, a, b)
	_, err = b.Runs.CancelAndDeleteRun(ctx, "r-00")
	require.NoError(t, err)
	syncRounds(t, 1, b, a)
	require.False(t, holds(t, a, "r-00"))
	adev, err := remote.Device(ctx, a.DB)
	require.NoError(t, err)
	own, err := a.Remote.OwnTombstones(ctx, a.DB, adev)
	require.NoError(t, err)
	assert.Len(t, own, 1, "A keeps its deletion of the first run")
	_, err = a.SyncWith(ctx, wsstore.SyncOptions{Base: true})
	require.NoError(t, err)
	for i := range 2 {
		assert.Empty(t, syncOK(t, d).Conflicts, "round %d: D names no conflict", i)
	}
	assert.False(t, holds(t, d, "r-00"), "D applies A's deletion of the first life")
}

// TestSyncItemsFromBeforeFirstEvents: items recorded before their rows
// named the run's first event (migration 00029) are given it by the next
// sync, so a deletion published after the upgrade names its run, and a
// run created later under the same id is kept everywhere.
func TestSyncItemsFromBeforeFirstEvents(t *testing.T) {
	_, open := fakeTier(t)
	ctx := context.Background()
	a, c := open(), open()
	smallRuns(t, a, "chat-1", "r", 2)
	syncRounds(t, 1, a, c)
	// As the upgrade leaves them: no first events, none filled yet; the
	// store opened again fills them.
	require.NoError(t, c.DB.Exec(ctx, `UPDATE sync_items SET first = NULL`))
	require.NoError(t, c.DB.Exec(ctx, `DELETE FROM meta WHERE key = 'remote.sync.first'`))
	require.NoError(t, c.Close())
	c, err := wsstore.Open(ctx, c.Dir, wsstore.Options{Remote: remote.Options{PackSize: 64 << 10, MaxAttempts: 2, MaxBackoff: 10 * time.Millisecond}})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })

	_, err = c.Runs.CancelAndDeleteRun(ctx, "r-00")
	require.NoError(t, err)
	syncOK(t, c)
	known, err := c.Remote.FindTombstones(ctx, c.DB, "run", "r-00")
	require.NoError(t, err)
	require.Len(t, known, 1)
	assert.False(t, known[0].Run().First.IsZero(), "the deletion names its run")
	var unnamed int
	require.NoError(t, c.DB.View(ctx, func(tx *index.Tx) error {
		return tx.GetContext(ctx, &unnamed, `SELECT count(*) FROM sync_items WHERE kind = 'run' AND first IS NULL`)
	}))
	assert.Zero(t, unnamed, "every run item here is given its first event")

	syncOK(t, a)
	_, err = a.Runs.CreateRun(ctx, runs.CreateRequest{Chat: chatOne, RunID: "r-00"})
	require.NoError(t, err)
	edit(t, a, "r-00", "life.md", "second life\n")
	for i := range 3 {
		for name, st := range map[string]*wsstore.Store{"A": a, "C": c} {
			assert.Empty(t, syncOK(t, st).Conflicts, "round %d: %s", i, name)
		}
	}
	for name, st := range map[string]*wsstore.Store{"A": a, "C": c, "E": open()} {
		syncOK(t, st)
		assert.Equal(t, "second life\n", secondLife(t, st, "r-00"), "%s holds the new run", name)
	}
}
