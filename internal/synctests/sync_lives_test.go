package synctests_test

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
	deleteRun(t, a, "r-00")
	syncRounds(t, 1, a, b, c)
	createRun(t, a, "r-00")
	syncOK(t, a)
	syncOK(t, b) // C is offline from here
	require.True(t, holds(t, b, "r-00"))
	deleteRun(t, b, "r-00")
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
	deleteRun(t, a, "r-00")
	createRun(t, a, "r-00")
	edit(t, a, "r-00", "life.md", "second life\n")
	syncOK(t, a)
	_, err := a.SyncWith(ctx, wsstore.SyncOptions{Base: true})
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
	deleteRun(t, a, "r-00")
	syncRounds(t, 1, a, c)
	createRun(t, c, "r-00")
	edit(t, c, "r-00", "life.md", "second life\n")
	syncOK(t, c)
	_, err := c.SyncWith(ctx, wsstore.SyncOptions{Base: true})
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
	s := storesByDevice(t, open, 2)
	b, a := s[0], s[1]
	smallRuns(t, a, "chat-1", "r", 1)
	syncRounds(t, 1, a, b)
	deleteRun(t, a, "r-00")
	syncRounds(t, 1, a, b)
	createRun(t, a, "r-00")
	for i := range 8 {
		edit(t, a, "r-00", fmt.Sprintf("x%d.md", i), "second life\n")
	}
	syncRounds(t, 1, a, b)
	deleteRun(t, b, "r-00")
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
	deleteRun(t, a, "r-00")
	createRun(t, a, "r-00")
	for i := range 8 {
		edit(t, a, "r-00", fmt.Sprintf("x%d.md", i), "second life\n")
	}
	syncRounds(t, 1, a, b)
	deleteRun(t, b, "r-00")
	syncRounds(t, 1, b, a)
	require.False(t, holds(t, a, "r-00"))
	assert.Equal(t, []string{"run r-00"}, ownTombstones(t, a), "A keeps its deletion of the first run")
	_, err := a.SyncWith(ctx, wsstore.SyncOptions{Base: true})
	require.NoError(t, err)
	for i := range 2 {
		assert.Empty(t, syncOK(t, d).Conflicts, "round %d: D names no conflict", i)
	}
	assert.False(t, holds(t, d, "r-00"), "D applies A's deletion of the first life")
}

// TestSyncItemsFromBeforeFirstEvents: items recorded before their rows
// named the run's first event (migration 00029) are given it when the
// store opens, so a deletion published after the upgrade names its run, and a
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

	deleteRun(t, c, "r-00")
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
	createRun(t, a, "r-00")
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

// TestSyncRunCreatedWhileDeletedElsewhere: B, which never read the first
// run, creates a second under its id while A deletes the first. A device
// that read B's run before A's deletion refused it (a conflict with the
// first) and then deleted the first; B sends its run again when it takes
// in the deletion of the other run, so every device ends with B's run,
// whatever order they read each other in.
func TestSyncRunCreatedWhileDeletedElsewhere(t *testing.T) {
	for pi, p := range allOrders {
		t.Run(fmt.Sprintf("order%d", pi), func(t *testing.T) {
			open, b, a, c := devicesInOrder(t, p)
			syncOK(t, b) // B syncs once, before the first run
			smallRuns(t, a, "chat-1", "r", 1)
			edit(t, a, "r-00", "life.md", "first life\n")
			syncRounds(t, 1, a, c)
			createRun(t, b, "r-00")
			edit(t, b, "r-00", "life.md", "second life\n")
			syncOK(t, b)
			deleteRun(t, a, "r-00")
			syncOK(t, a)
			syncRounds(t, 4, c, a, b)
			all := map[string]*wsstore.Store{"A": a, "B": b, "C": c, "E": open()}
			syncOK(t, all["E"])
			for name, st := range all {
				assert.Equal(t, "second life\n", secondLife(t, st, "r-00"), "%s holds B's run, which nobody deleted", name)
			}
		})
	}
}

// TestSyncConflictThenOwnDeletion: X keeps the first run against A's
// second (X wrote to the first meanwhile: a conflict), then deletes it;
// A sends its run again on taking in that deletion, so X ends holding
// A's run, which nobody deleted.
func TestSyncConflictThenOwnDeletion(t *testing.T) {
	_, open := fakeTier(t)
	a, x := open(), open()
	smallRuns(t, a, "chat-1", "r", 1)
	edit(t, a, "r-00", "life.md", "first life\n")
	syncRounds(t, 1, a, x)
	deleteRun(t, a, "r-00")
	createRun(t, a, "r-00")
	edit(t, a, "r-00", "life.md", "second life\n")
	edit(t, x, "r-00", "x.md", "X wrote\n")
	syncRounds(t, 1, a, x)
	require.Equal(t, "first life\n", secondLife(t, x, "r-00"), "X kept the first run")
	deleteRun(t, x, "r-00")
	syncRounds(t, 3, x, a)
	e := open()
	syncOK(t, e)
	for name, st := range map[string]*wsstore.Store{"A": a, "X": x, "E": e} {
		assert.Equal(t, "second life\n", secondLife(t, st, "r-00"), "%s holds A's run", name)
	}
}

// TestSyncRunCreatedAgainAtTheSameInstant: a run deleted and created again
// at the same clock reading (a clock a host fixed) has the same first
// event as the old one, so nothing names the two apart; the devices then
// hold the same run or name the conflict, never different runs silently
// (docs/limits.md).
func TestSyncRunCreatedAgainAtTheSameInstant(t *testing.T) {
	ctx := context.Background()
	srv, _ := fakeTier(t)
	at := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	openAt := func() *wsstore.Store {
		st, err := wsstore.Open(ctx, t.TempDir(), wsstore.Options{Blobs: "s3://wsstore/team?endpoint=" + srv.URL,
			Now: func() time.Time { return at }})
		require.NoError(t, err)
		t.Cleanup(func() { st.Close() })
		return st
	}
	a, b := openAt(), openAt()
	createRun(t, a, "r-00")
	edit(t, a, "r-00", "life.md", "first life\n")
	syncRounds(t, 1, a, b)
	deleteRun(t, a, "r-00")
	createRun(t, a, "r-00")
	edit(t, a, "r-00", "life.md", "second life\n")
	named := false
	for range 3 {
		for _, st := range []*wsstore.Store{a, b} {
			named = named || len(syncOK(t, st).Conflicts) > 0
		}
	}
	same := secondLife(t, a, "r-00") == secondLife(t, b, "r-00")
	assert.True(t, same || named, "A holds %q, B %q, and no conflict was named", secondLife(t, a, "r-00"), secondLife(t, b, "r-00"))
}

// TestSyncFirstEventsSkipAnUnreadableEvent: a store from before migration
// 00029 whose synced run has an event that does not read (fsck's to
// report) still opens for writing; that item is left without its first
// event.
func TestSyncFirstEventsSkipAnUnreadableEvent(t *testing.T) {
	_, open := fakeTier(t)
	ctx := context.Background()
	a := open()
	smallRuns(t, a, "chat-1", "r", 1)
	syncOK(t, a)
	require.NoError(t, a.DB.Exec(ctx, `UPDATE sync_items SET first = NULL`))
	require.NoError(t, a.DB.Exec(ctx, `DELETE FROM meta WHERE key = 'remote.sync.first'`))
	require.NoError(t, a.DB.Exec(ctx, `UPDATE events SET payload = CAST(x'07' AS TEXT) WHERE run_id = 'r-00' AND seq = 1`))
	require.NoError(t, a.Close())
	st, err := wsstore.Open(ctx, a.Dir, wsstore.Options{})
	require.NoError(t, err, "an unreadable event does not keep the store from opening")
	require.NoError(t, st.Close())
}
