package synctests_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/remote"
	"github.com/wsstore/wsstore/wserr"
)

// TestSyncIndexDamaged: an index object whose bytes do not hash to its
// key is skipped and named (SyncReport.Pulled.Damaged, PullStats.Damaged)
// by the sync or pull that meets it, and the rest is taken in: a new
// device's listing of index/ included. The objects only it lists are
// found in their pack, which ends with the same index, when a segment's
// archive needs them, so the device reads every file of the device whose
// index object is damaged. Before, every such sync or pull failed with
// store.corrupt at the index object, taking in nothing, until the object
// was removed by hand. Removed by hand, it is not missed: a device that
// needs what it listed finds it in the pack all the same; reclaim,
// which cannot tell which pack a damaged index object keeps, removes
// nothing while it is there and says to remove it.
func TestSyncIndexDamaged(t *testing.T) {
	ctx := context.Background()
	srv, open := fakeTier(t)
	c, e := open(), open()
	smallRuns(t, c, "chat-c", "c0", 3)
	devC := syncOK(t, c).Device
	smallRuns(t, e, "chat-e", "e0", 2)
	syncOK(t, e)
	gets := srv.Count("GET")
	syncOK(t, open())
	undamaged := srv.Count("GET") - gets
	var damaged string
	for _, k := range srv.Keys("wsstore", "team/index/") {
		b, ok := srv.Object("wsstore", k)
		require.True(t, ok)
		if strings.Contains(string(b), `"device":"`+devC+`"`) {
			require.Empty(t, damaged, "one index object of C's")
			damaged = k
			srv.SetObject("wsstore", k, b[:len(b)/2])
		}
	}
	require.NotEmpty(t, damaged)
	key := strings.TrimPrefix(damaged, "team/")

	t.Run("NewDevice", func(t *testing.T) {
		d := open()
		gets, lists := srv.Count("GET"), 0
		lists, _ = srv.Lists("team/data/")
		rep, err := d.Sync(ctx)
		require.NoError(t, err)
		listed, _ := srv.Lists("team/data/")
		t.Logf("a new device's sync: %d GETs and %d listings of data/; %d GETs and none before the damage", srv.Count("GET")-gets, listed-lists, undamaged)
		assert.Equal(t, []string{key}, rep.Pulled.Damaged)
		assert.Equal(t, runIDs(t, c)[:3], runIDs(t, d)[:3], "C's runs")
		assert.Contains(t, runIDs(t, d), "e0-01")
		requireSame(t, contents(t, c), contents(t, d))
	})
	t.Run("Pull", func(t *testing.T) {
		d := open()
		st, err := d.PullRemote(ctx)
		require.NoError(t, err)
		assert.Equal(t, []string{key}, st.Damaged)
		assert.Positive(t, st.Objects, "E's objects")
		st, err = d.PullRemote(ctx)
		require.NoError(t, err)
		assert.Empty(t, st.Damaged, "read once a listing: later pulls read the segments' index names")
	})
	t.Run("Removed", func(t *testing.T) {
		_, err := c.ReclaimRemote(ctx, remote.ReclaimOptions{DryRun: true})
		require.Equal(t, wserr.Corrupt, wserr.CodeOf(err), "reclaim removes nothing while it is there: %v", err)
		assert.Contains(t, err.Error(), "remove it from the object store")
		srv.SetObject("wsstore", damaged, nil)
		d := open()
		rep := syncOK(t, d)
		assert.Empty(t, rep.Pulled.Damaged)
		requireSame(t, contents(t, c), contents(t, d))
		_, err = c.ReclaimRemote(ctx, remote.ReclaimOptions{DryRun: true})
		require.NoError(t, err)
	})
}
