package actors_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/actors"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/wserr"
)

// TestStatsPageWalksOnlyUncountedSpaces: a page of stats reads each
// space's totals from its row, and walks the tree only of a space whose
// row has none (last changed by a build that kept none); the listing's
// directory of such a space gives its bytes from its top entries, with
// no walk.
func TestStatsPageWalksOnlyUncountedSpaces(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	w := &walkCounter{Trees: st.Trees}
	sp := actors.New(st.DB, st.Blobs, w, nil, time.Now)
	for _, f := range [][2]string{{"alice", "a/one.md"}, {"alice", "a/b/two.md"}, {"alice", "three.md"}, {"bob", "x.md"}, {"carol", "y.md"}} {
		_, err := sp.Upload(ctx, f[0], f[1], strings.NewReader(f[1]))
		require.NoError(t, err)
	}
	want, err := sp.Stats(ctx, "alice")
	require.NoError(t, err)
	require.NoError(t, st.DB.Update(ctx, func(tx *index.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE actor_spaces SET files = NULL, dirs = NULL, bytes = NULL WHERE actor = 'alice'`)
		return err
	}))

	w.walks = 0
	page, more, err := sp.StatsPage(ctx, nil, "", 0)
	require.NoError(t, err)
	assert.False(t, more)
	require.Len(t, page, 3)
	assert.Equal(t, want, page[0], "alice's stats, walked")
	assert.Equal(t, 1, w.walks, "only the space without totals is walked")

	w.walks = 0
	ls, more, err := sp.WorkspacePage(ctx, nil, "", 1, actors.WorkspaceCursor{}, 0)
	require.NoError(t, err)
	assert.False(t, more)
	require.Len(t, ls, 3)
	assert.Equal(t, "alice", ls[0].Path)
	assert.Equal(t, want.Bytes, ls[0].Size, "the bytes of its files")
	assert.Equal(t, want.Root, ls[0].Hash)
	assert.Zero(t, w.walks)

	_, _, err = sp.StatsPage(ctx, nil, "", actors.MaxStatsLimit+1)
	assert.Equal(t, wserr.InvalidArgument, wserr.CodeOf(err), "%v", err)
	page, more, err = sp.StatsPage(ctx, []string{"carol", "alice", "carol", "dave"}, "alice", 0)
	require.NoError(t, err)
	assert.False(t, more)
	require.Len(t, page, 1, "the actors named, after alice, that have a space")
	assert.Equal(t, "carol", page[0].Actor)
}
