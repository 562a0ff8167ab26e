package wsstore_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
)

// TestSyncOwnDeletionOutlivesAnOlderOne: Y deletes a run at an older
// state, A deletes it at the newer state A wrote, and A takes in Y's
// tombstone before it publishes its own. A's deletion is still published:
// a tombstone taken in never replaces a newer one, nor one of this device
// not yet published. So the run is gone from every device, and a device
// that holds A's newer state (C) deletes it too rather than keep it
// against Y's older deletion.
func TestSyncOwnDeletionOutlivesAnOlderOne(t *testing.T) {
	_, open := fakeTier(t)
	ctx := context.Background()
	a, y, c := open(), open(), open()
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
	// A new device reads the segments in the order of the devices' ids:
	// it may apply Y's older deletion before A's tail of the run arrives,
	// and name that tail a conflict (docs/limits.md); the run stays gone
	// everywhere all the same.
	e := open()
	re := syncOK(t, e)
	t.Logf("new device: conflicts %v", conflictNames(re.Conflicts))
	syncRounds(t, 2, a, y, c, e)
	for name, st := range map[string]*wsstore.Store{"A": a, "Y": y, "C": c, "E (new)": e} {
		assert.NotContains(t, runIDs(t, st), "r-00", name)
	}
}
