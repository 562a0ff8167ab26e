package synctests_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
)

// TestSyncOwnSuccessorOutlivesALaterDeletion: B deletes a run and creates
// it again under its id before it syncs, while C writes to the old run,
// syncs, deletes it and syncs again. B's sync takes in C's deletion, of a
// later state than B's own, which replaces B's deletion, and must still
// name B's new run as the successor: A, which kept the old run at the
// state B deleted and read nothing since, then puts the new run in its
// place, whatever order it reads B and C in, rather than refusing the new
// run (another run under the id), then deleting the old one at C's
// deletion and holding nothing under the id while B and C hold the new
// run.
func TestSyncOwnSuccessorOutlivesALaterDeletion(t *testing.T) {
	for pi, p := range allOrders {
		t.Run(fmt.Sprintf("order%d", pi), func(t *testing.T) {
			open, a, b, c := devicesInOrder(t, p)
			smallRuns(t, a, "chat-1", "r", 1)
			edit(t, a, "r-00", "life.md", "first life\n")
			syncRounds(t, 1, a, b, c)

			edit(t, c, "r-00", "c.md", "written on C\n")
			syncOK(t, c)
			deleteRun(t, c, "r-00")
			syncOK(t, c)

			deleteRun(t, b, "r-00")
			createRun(t, b, "r-00")
			edit(t, b, "r-00", "life.md", "second life\n")
			syncOK(t, b)

			syncOK(t, a)
			assert.Equal(t, "second life\n", secondLife(t, a, "r-00"), "A holds the new run")
			syncRounds(t, 2, b, c, a)
			for name, st := range map[string]*wsstore.Store{"A": a, "B": b, "C": c, "E": open()} {
				syncOK(t, st)
				assert.Equal(t, "second life\n", secondLife(t, st, "r-00"), "%s holds the new run", name)
			}
			_, err := b.SyncWith(context.Background(), wsstore.SyncOptions{Base: true})
			require.NoError(t, err)
			for name, st := range map[string]*wsstore.Store{"A": a, "C": c, "E2": open()} {
				syncOK(t, st)
				assert.Equal(t, "second life\n", secondLife(t, st, "r-00"), "after B's base, %s holds the new run", name)
			}
		})
	}
}
