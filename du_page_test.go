package wsstore_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// TestDUPages: DUPage gives DU's rows a page at a time, in DU's order:
// the pages, each after the last row of the one before, are the rows DU
// gives, and more says whether rows follow. A row gone since (a run
// deleted) still places the page; a limit out of range is refused.
func TestDUPages(t *testing.T) {
	ctx := context.Background()
	st := storetest.OpenStore(t)
	for c := range 3 {
		for r := range 4 {
			id := fmt.Sprintf("r%d%d", c, r)
			_, err := st.Runs.CreateRun(ctx, runs.CreateRequest{Chat: runs.ChatKey{Kind: "character", StableChatID: fmt.Sprint("c", c)}, RunID: id})
			require.NoError(t, err)
			for f := range 20 {
				_, err = st.Runs.Workspace(id, runs.HostScope).Write(ctx, vfs.MustPath(fmt.Sprintf("output/d%d/f%d.md", f%5, f)), fmt.Appendf(nil, "%s %d", id, f), vfs.WriteOptions{})
				require.NoError(t, err)
			}
		}
	}
	var whole []wsstore.Usage
	require.NoError(t, st.DU(ctx, func(u wsstore.Usage) error { whole = append(whole, u); return nil }))
	require.Len(t, whole, 15, "3 chats' rows and their 12 runs'")

	var paged []wsstore.Usage
	after := wsstore.UsageKey{}
	for {
		page, more, err := st.DUPage(ctx, after, 4)
		require.NoError(t, err)
		require.LessOrEqual(t, len(page), 4)
		paged = append(paged, page...)
		if !more {
			break
		}
		require.NotEmpty(t, page)
		last := page[len(page)-1]
		after = wsstore.UsageKey{ChatID: last.ChatID, RunID: last.RunID}
	}
	assert.Equal(t, whole, paged, "the pages are DU's rows")

	page, more, err := st.DUPage(ctx, wsstore.UsageKey{}, 0)
	require.NoError(t, err)
	assert.Equal(t, whole, page, "limit 0: the default, every row here")
	assert.False(t, more)

	// A row gone since places the page all the same.
	gone := whole[6]
	_, err = st.Runs.CancelAndDeleteRun(ctx, gone.RunID)
	require.NoError(t, err)
	page, _, err = st.DUPage(ctx, wsstore.UsageKey{ChatID: gone.ChatID, RunID: gone.RunID}, 2)
	require.NoError(t, err)
	require.Len(t, page, 2)
	assert.Equal(t, whole[7].RunID, page[0].RunID)

	for _, limit := range []int{-1, wsstore.MaxDUPage + 1} {
		_, _, err := st.DUPage(ctx, wsstore.UsageKey{}, limit)
		assert.Equal(t, wserr.InvalidArgument, wserr.CodeOf(err), "limit %d", limit)
	}
}
