package synctests_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

// TestSyncOwnDeletionOutlivesAnOlderOne: Y deletes a run at an older
// state, A deletes it at the newer state A wrote, and A takes in Y's
// tombstone before it publishes its own. A's deletion is still published:
// a tombstone taken in never replaces a newer one, nor one of this device
// not yet published. So the run is gone from every device, and a device
// that holds A's newer state (C) deletes it too rather than keep it
// against Y's older deletion. A new device E, whatever the order in which
// it reads the others, names no conflict: when it reads Y's deletion
// before A's tail of the run, the tail is of a run deleted here, whose
// writer settles it against the deletion (A deleted it too).
func TestSyncOwnDeletionOutlivesAnOlderOne(t *testing.T) {
	for pi, p := range allOrders {
		t.Run(fmt.Sprint("order", pi), func(t *testing.T) {
			open, a, y, c := devicesInOrder(t, p)
			ctx := context.Background()
			smallRuns(t, a, "chat-1", "r", 1)
			syncOK(t, a)
			syncOK(t, y)
			syncOK(t, c)
			edit(t, a, "r-00", "more.md", "A\n")
			syncOK(t, a)
			syncOK(t, c)
			_, err := y.Runs.CancelAndDeleteRun(ctx, "r-00")
			require.NoError(t, err)
			_, err = a.Runs.CancelAndDeleteRun(ctx, "r-00")
			require.NoError(t, err)
			syncOK(t, y)
			ra := syncOK(t, a)
			assert.Contains(t, ra.Tombstones, "run r-00", "A publishes its own deletion")
			syncRounds(t, 2, a, y, c)
			for name, st := range map[string]*wsstore.Store{"A": a, "Y": y, "C": c} {
				rep := syncOK(t, st)
				assert.Empty(t, rep.Conflicts, name)
				assert.NotContains(t, runIDs(t, st), "r-00", name)
			}
			e := open()
			re := syncOK(t, e)
			assert.Empty(t, re.Conflicts, "the new device")
			syncRounds(t, 2, a, y, c, e)
			for name, st := range map[string]*wsstore.Store{"A": a, "Y": y, "C": c, "E (new)": e} {
				assert.NotContains(t, runIDs(t, st), "r-00", name)
			}
		})
	}
}

// TestSyncBystanderNamesAConflictWhenTheRunComesBack: Y deletes a run at
// the state it last saw while A, not knowing, writes to it. C, which only
// passes the run on, may read Y's deletion before A's tail; it names
// nothing for the tail, but once A has met the deletion, kept the run and
// sent it whole, C takes the run back in against Y's deletion and names
// the conflict. Whatever the order of the devices' ids, every device ends
// holding A's run, C included, and each names the conflict.
func TestSyncBystanderNamesAConflictWhenTheRunComesBack(t *testing.T) {
	for pi, p := range allOrders {
		t.Run(fmt.Sprint("order", pi), func(t *testing.T) {
			_, a, y, c := devicesInOrder(t, p)
			ctx := context.Background()
			smallRuns(t, a, "chat-1", "r", 1)
			syncRounds(t, 1, a, y, c)
			// Y deletes the run and A writes to it; A publishes its tail
			// before Y publishes the deletion.
			_, err := y.Runs.CancelAndDeleteRun(ctx, "r-00")
			require.NoError(t, err)
			edit(t, a, "r-00", "late.md", "A\n")
			named := map[string]bool{}
			note := func(name string, rep wsstore.SyncReport) {
				if slices.Contains(conflictNames(rep.Conflicts), "run r-00") {
					named[name] = true
				}
			}
			note("A", syncOK(t, a))
			note("Y", syncOK(t, y))
			note("C", syncOK(t, c))
			for range 3 {
				note("A", syncOK(t, a))
				note("Y", syncOK(t, y))
				note("C", syncOK(t, c))
			}
			for name, st := range map[string]*wsstore.Store{"A": a, "Y": y, "C": c} {
				assert.Contains(t, runIDs(t, st), "r-00", name)
				assert.True(t, named[name], "%s names the conflict", name)
			}
			got, err := c.Runs.Workspace("r-00", runs.ModelScope).Read(ctx, vfs.MustPath("output/late.md"), vfs.ReadOptions{})
			require.NoError(t, err)
			assert.Equal(t, "A\n", got.Text, "C holds A's writes")
		})
	}
}
