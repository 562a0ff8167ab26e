package synctests_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// secondLife reads output/life.md of run id, "" when the run or the file
// is not there.
func secondLife(t *testing.T, st *wsstore.Store, id string) string {
	t.Helper()
	res, err := st.Runs.Workspace(id, runs.ModelScope).Read(context.Background(), vfs.MustPath("output/life.md"), vfs.ReadOptions{})
	if wserr.Is(err, wserr.RunNotFound) || wserr.Is(err, wserr.FileNotFound) {
		return ""
	}
	require.NoError(t, err)
	return res.Text
}

// TestSyncRunCreatedAgain: a run deleted and created again under the same
// id before the next sync is published as the old run's deletion and the
// new run: every device, whatever the order in which it reads the
// others, ends with the new run and names no conflict, also after the
// creating device publishes a base, and a device that starts later gets
// the new run. Before, the other devices kept the old run and named the
// new one a conflict (the journals part at event 1).
func TestSyncRunCreatedAgain(t *testing.T) {
	for pi, p := range rotations {
		t.Run(fmt.Sprintf("order%d", pi), func(t *testing.T) {
			open, a, b, c := devicesInOrder(t, p)
			ctx := context.Background()
			smallRuns(t, a, "chat-1", "r", 2)
			edit(t, a, "r-00", "life.md", "first life\n")
			syncRounds(t, 1, a, b, c)
			require.Equal(t, "first life\n", secondLife(t, b, "r-00"))

			deleteRun(t, a, "r-00")
			createRun(t, a, "r-00")
			edit(t, a, "r-00", "life.md", "second life\n")
			rep := syncOK(t, a)
			assert.Equal(t, []string{"run r-00"}, rep.Tombstones, "the old run's deletion is published")
			assert.Contains(t, rep.Sent, "run r-00", "and the new run")

			check := func(when string, sts map[string]*wsstore.Store) {
				t.Helper()
				for name, st := range sts {
					rep := syncOK(t, st)
					assert.Empty(t, rep.Conflicts, "%s, %s names no conflict", when, name)
				}
				for name, st := range sts {
					assert.Equal(t, "second life\n", secondLife(t, st, "r-00"), "%s, %s holds the new run", when, name)
					_, err := st.Runs.Run(ctx, "r-01")
					assert.NoError(t, err, "%s, %s keeps the other run", when, name)
				}
			}
			check("after the deletion", map[string]*wsstore.Store{"B": b, "C": c, "A": a})
			check("again", map[string]*wsstore.Store{"B": b, "C": c, "A": a})

			_, err := a.SyncWith(ctx, wsstore.SyncOptions{Base: true})
			require.NoError(t, err)
			check("after A's base", map[string]*wsstore.Store{"B": b, "C": c, "A": a, "E": open()})
		})
	}
}

// TestSyncRunCreatedAgainWrittenElsewhere: a device that wrote to the old
// run before it took in the deletion and the new run keeps what it
// wrote and names the conflict; a run created again and deleted again
// before the sync is deleted everywhere.
func TestSyncRunCreatedAgainWrittenElsewhere(t *testing.T) {
	t.Run("WrittenElsewhere", func(t *testing.T) {
		_, open := fakeTier(t)
		a, b := open(), open()
		smallRuns(t, a, "chat-1", "r", 1)
		syncRounds(t, 1, a, b)
		deleteRun(t, a, "r-00")
		createRun(t, a, "r-00")
		edit(t, a, "r-00", "life.md", "second life\n")
		edit(t, b, "r-00", "life.md", "B's writes to the first\n")
		syncOK(t, a)
		rep := syncOK(t, b)
		assert.Contains(t, conflictNames(rep.Conflicts), "run r-00", "B names the conflict")
		assert.Equal(t, "B's writes to the first\n", secondLife(t, b, "r-00"), "B keeps what it wrote")
	})
	t.Run("DeletedAgain", func(t *testing.T) {
		_, open := fakeTier(t)
		ctx := context.Background()
		a, b := open(), open()
		smallRuns(t, a, "chat-1", "r", 1)
		syncRounds(t, 1, a, b)
		deleteRun(t, a, "r-00")
		createRun(t, a, "r-00")
		deleteRun(t, a, "r-00")
		assert.Equal(t, []string{"run r-00"}, syncOK(t, a).Tombstones)
		syncRounds(t, 2, b, a)
		e := open()
		syncOK(t, e)
		for name, st := range map[string]*wsstore.Store{"A": a, "B": b, "E": e} {
			_, err := st.Runs.Run(ctx, "r-00")
			assert.Equal(t, wserr.RunNotFound, wserr.CodeOf(err), "%s", name)
		}
	})
}

// TestSyncRunCreatedAfterADeletion: a run created under the id of a run
// deleted earlier and synced (by another device, or by the creating
// device itself) is kept everywhere and named no conflict, whatever the
// order in which the devices read each other and whether the third
// device read the deletion before the new run. Before, the deletion's
// tombstone, which names a state by its length and last event, deleted
// the new, shorter run on every device, its creator included, silently.
func TestSyncRunCreatedAfterADeletion(t *testing.T) {
	for _, deleter := range []string{"C", "A"} {
		for _, bSees := range []bool{false, true} {
			for pi, p := range allOrders {
				t.Run(fmt.Sprintf("%s deletes/B reads the deletion %v/order%d", deleter, bSees, pi), func(t *testing.T) {
					open, a, b, c := devicesInOrder(t, p)
					ctx := context.Background()
					smallRuns(t, a, "chat-1", "r", 1)
					edit(t, a, "r-00", "life.md", "first life\n")
					syncRounds(t, 1, a, b, c)
					del := map[string]*wsstore.Store{"A": a, "C": c}[deleter]
					deleteRun(t, del, "r-00")
					syncOK(t, del)
					syncOK(t, a)
					if bSees {
						syncOK(t, b)
					}
					_, err := a.Runs.Run(ctx, "r-00")
					require.Equal(t, wserr.RunNotFound, wserr.CodeOf(err))
					createRun(t, a, "r-00")
					edit(t, a, "r-00", "life.md", "second life\n")
					all := map[string]*wsstore.Store{"A": a, "B": b, "C": c}
					for range 3 {
						for _, name := range []string{"A", "B", "C"} {
							assert.Empty(t, syncOK(t, all[name]).Conflicts, "%s names no conflict", name)
						}
					}
					all["E"] = open()
					assert.Empty(t, syncOK(t, all["E"]).Conflicts)
					for name, st := range all {
						assert.Equal(t, "second life\n", secondLife(t, st, "r-00"), "%s holds the new run", name)
					}
				})
			}
		}
	}
}

// deleteRun cancels and deletes run id in st.
func deleteRun(t *testing.T, st *wsstore.Store, id string) {
	t.Helper()
	_, err := st.Runs.CancelAndDeleteRun(context.Background(), id)
	require.NoError(t, err)
}

// createRun creates run id in chat-1 of st, again for an id used before.
func createRun(t *testing.T, st *wsstore.Store, id string) {
	t.Helper()
	_, err := st.Runs.CreateRun(context.Background(), runs.CreateRequest{Chat: chatOne, RunID: id})
	require.NoError(t, err)
}
