package wsstore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/runs"
)

// TestCloseKeepsToTheCap: a store's Close runs the queued re-encodings
// (and its background runner may take them before); where they would take
// it past its cap (maxStoreBytes) they stay queued and the store keeps to
// its cap, as its writes do.
func TestCloseKeepsToTheCap(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := wsstore.Open(ctx, dir, wsstore.Options{})
	require.NoError(t, err)
	require.NoError(t, storetest.CreatePadding(ctx, st.DB))
	used, err := st.DB.UsedBytes(ctx)
	require.NoError(t, err)
	require.NoError(t, st.Close())

	limit := used + 48<<10 // room for the writes, not for a job's 64 KiB
	g := storetest.NewGrowingStorage()
	g.Grow.Store(true)
	st, err = wsstore.Open(ctx, dir, wsstore.Options{CAS: cas.Options{Storage: g, DictMax: -1}, Runs: runs.Options{MaxStoreBytes: limit}})
	require.NoError(t, err)
	var prev cas.Hash
	doc := strings.Repeat("The keeper lit the lamp at dusk and watched the ships.\n", 40)
	for i := range 6 {
		h, err := st.Blobs.PutVersion(ctx, nil, []byte(fmt.Sprintf("%sRound %d.\n", doc, i)), prev)
		require.NoError(t, err)
		prev = h
	}
	require.NoError(t, st.Close())

	st, err = wsstore.Open(ctx, dir, wsstore.Options{Index: index.Options{ReadOnly: true}})
	require.NoError(t, err)
	defer st.Close()
	after, err := st.DB.UsedBytes(ctx)
	require.NoError(t, err)
	assert.LessOrEqual(t, after, limit, "the store's own work kept to its cap")
	left, err := st.Blobs.PendingReencodes(ctx)
	require.NoError(t, err)
	assert.Positive(t, left, "the jobs that did not fit stay queued")
}
