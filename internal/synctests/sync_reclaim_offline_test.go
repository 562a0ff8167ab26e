package synctests_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/remote"
)

// TestReclaimKeepsWhatAnUnreadSegmentNames: device Y syncs, then is away
// while X writes run t, syncs, deletes it, collects its contents and
// syncs again. A reclaim then keeps t's pack: X's segment that brings t
// is still one Y will read (no base of X's stands for it yet). Before,
// reclaim went by X's object set as its newest segment states it, which
// no longer named t's contents, and removed the pack; Y's next sync then
// failed on that segment (archive.corrupt) every time. Y takes t in and
// the tombstone after it deletes it again.
func TestReclaimKeepsWhatAnUnreadSegmentNames(t *testing.T) {
	srv, open := fakeTier(t)
	ctx := context.Background()
	x, y := open(), open()
	smallRuns(t, x, "chat-x", "r", 2)
	syncOK(t, x)
	syncOK(t, y)

	smallRuns(t, x, "chat-x", "t", 1)
	syncOK(t, x)
	_, err := x.Runs.CancelAndDeleteRun(ctx, "t-00")
	require.NoError(t, err)
	_, err = x.GC(ctx, wsstore.GCOptions{Grace: -1})
	require.NoError(t, err)
	syncOK(t, x)
	packs := srv.Keys("wsstore", "team/data/")
	st, err := x.ReclaimRemote(ctx, remote.ReclaimOptions{Grace: -1})
	require.NoError(t, err)
	assert.Zero(t, st.Packs, "t's pack is named by a segment Y has yet to read")
	assert.Equal(t, packs, srv.Keys("wsstore", "team/data/"))

	rep := syncOK(t, y)
	assert.Contains(t, rep.Deleted, "run t-00", "brought in, then deleted by the tombstone")
	ids := runIDs(t, y)
	assert.Equal(t, []string{"r-00", "r-01"}, ids)
}
