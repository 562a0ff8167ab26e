package remote_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/remote"
)

// unreadable counts the objects db records that cannot be read: chunked
// blobs with a chunk not recorded, deltas (and blobs compressed with a
// dictionary) whose base is not.
func unreadable(t *testing.T, db *index.DB) int {
	t.Helper()
	var n int
	require.NoError(t, db.View(context.Background(), func(tx *index.Tx) error {
		return tx.GetContext(context.Background(), &n, `SELECT
			(SELECT count(*) FROM remote_chunks c WHERE NOT EXISTS (SELECT 1 FROM remote_objects o WHERE o.kind = 1 AND o.hash = c.chunk)) +
			(SELECT count(*) FROM remote_objects d WHERE d.base IS NOT NULL AND NOT EXISTS (SELECT 1 FROM remote_objects b WHERE b.kind = 0 AND b.hash = d.base))`)
	}))
	return n
}

// TestPullCutOffLeavesEveryRecordReadable cuts a pull off after each
// number of index objects read: whatever it recorded reads, since no
// chunked blob is recorded before its chunks (which another index object
// may list), and the next pull completes it.
func TestPullCutOffLeavesEveryRecordReadable(t *testing.T) {
	srv := fakeBucket(t)
	ctx := context.Background()
	opts := remote.Options{PackSize: 16 << 10, MaxAttempts: 1, MaxBackoff: time.Millisecond}
	a := newDevice(t, srv.URL, "bkt", opts)
	files := contents(40)
	hs := a.put(t, files)
	_, err := a.st.Push(ctx, a.db)
	require.NoError(t, err)
	indexes := len(srv.Keys("bkt", "store/index/"))
	require.Greater(t, indexes, 3)

	cuts := 0
	for n := int64(0); ; n++ {
		b := newDevice(t, srv.URL, "bkt", opts)
		var gets atomic.Int64
		srv.SetFault(func(r *http.Request) int {
			if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/store/index/") && gets.Add(1) > n {
				return http.StatusServiceUnavailable
			}
			return 0
		})
		_, err := b.st.Pull(ctx, b.db)
		srv.SetFault(nil)
		assert.Zero(t, unreadable(t, b.db), "pull cut off after %d index reads", n)
		if err == nil {
			b.requireAll(t, hs, files)
			break
		}
		cuts++
		_, err = b.st.Pull(ctx, b.db)
		require.NoError(t, err, "the next pull goes on")
		assert.Zero(t, unreadable(t, b.db))
		b.requireAll(t, hs, files)
	}
	assert.GreaterOrEqual(t, cuts, indexes, "every index object read was a place to cut")
}
