package synctests_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/remote"
)

// TestSyncSameDeletionOnTwoDevices: two devices that delete the same
// state of a run each keep their own tombstone of it, whichever reads the
// other's first, so each one's later base segments carry the deletion.
// Before, a device that took in the other's tombstone of the same state
// recorded it in place of its own, so its bases left the deletion out
// (had both devices done so, which overlapping syncs allow, no base would
// carry it, and a device offline until the older segments were reclaimed
// would keep the run).
func TestSyncSameDeletionOnTwoDevices(t *testing.T) {
	_, open := fakeTier(t)
	ctx := context.Background()
	a, b := open(), open()
	smallRuns(t, a, "chat-1", "r", 2)
	syncRounds(t, 1, a, b)
	for _, st := range []*wsstore.Store{a, b} {
		_, err := st.Runs.CancelAndDeleteRun(ctx, "r-00")
		require.NoError(t, err)
	}
	syncRounds(t, 2, a, b)
	for name, st := range map[string]*wsstore.Store{"A": a, "B": b} {
		assert.Equal(t, []string{"run r-00"}, ownTombstones(t, st), "%s keeps its own tombstone", name)
	}
}

// ownTombstones names the tombstones st's later bases carry as its own.
func ownTombstones(t *testing.T, st *wsstore.Store) []string {
	t.Helper()
	ctx := context.Background()
	dev, err := remote.Device(ctx, st.DB)
	require.NoError(t, err)
	own, err := st.Remote.OwnTombstones(ctx, st.DB, dev)
	require.NoError(t, err)
	defer own.Close()
	var names []string
	require.NoError(t, own.Each(func(tb remote.Tombstone) error {
		names = append(names, tb.Kind+" "+tb.ID)
		return nil
	}))
	return names
}
