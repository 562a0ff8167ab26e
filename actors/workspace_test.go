package actors_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/actors"
	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/vfs"
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

// listCounter is the store's trees with the entries their pages read
// counted.
type listCounter struct {
	*vfs.Trees
	entries int
}

func (l *listCounter) ListPage(ctx context.Context, tx *index.Tx, root cas.Hash, p vfs.Path, depth int, page vfs.ListPage) ([]vfs.Listed, bool, error) {
	ls, more, err := l.Trees.ListPage(ctx, tx, root, p, depth, page)
	l.entries += len(ls)
	return ls, more, err
}

// TestWorkspacePageReadsAPageOfEachSpace: a page of the spaces as one
// tree reads no more of a space's entries than the page has room for,
// however many the space holds, even when the space's directory fills
// the page.
func TestWorkspacePageReadsAPageOfEachSpace(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	l := &listCounter{Trees: st.Trees}
	sp := actors.New(st.DB, st.Blobs, l, nil, time.Now)
	_, err := sp.Upload(ctx, "alice", "a.md", strings.NewReader("a"))
	require.NoError(t, err)
	for i := range 50 {
		_, err := sp.Upload(ctx, "bob", fmt.Sprintf("f%02d.md", i), strings.NewReader("b"))
		require.NoError(t, err)
	}

	l.entries = 0
	ls, more, err := sp.WorkspacePage(ctx, nil, "", 2, actors.WorkspaceCursor{}, 2)
	require.NoError(t, err)
	assert.True(t, more)
	var got []string
	for _, e := range ls {
		got = append(got, e.Path)
	}
	assert.Equal(t, []string{"alice", "alice/a.md"}, got)
	assert.LessOrEqual(t, l.entries, 3, "the entries of the spaces read for a page of 2")
}
