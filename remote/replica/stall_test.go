package replica_test

import (
	"context"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/remote"
	"github.com/wsstore/wsstore/remote/replica"
	"github.com/wsstore/wsstore/remote/s3fake"
	"github.com/wsstore/wsstore/wserr"
)

// stalls makes srv leave unanswered every request for which fn returns
// true, and returns how many it so left.
func stalls(srv *s3fake.Server, fn func(r *http.Request) bool) func() int {
	var mu sync.Mutex
	n := 0
	srv.SetStall(func(r *http.Request) bool {
		mu.Lock()
		defer mu.Unlock()
		if fn(r) {
			n++
			return true
		}
		return false
	})
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		return n
	}
}

// TestStalledStoreIsUnavailable: an object store that takes the
// connection and then answers nothing fails a replication round, and a
// restore (its listing, or its downloads), with store.busy wrapping
// remote.ErrUnavailable once Options.IdleTimeout has passed, as the blob
// tier's requests do (before, Litestream's client waited a day for each
// answer). The round ships nothing and the next, the server answering
// again, ships the transaction; the failed restore leaves no database, and
// the next restores every transaction.
func TestStalledStoreIsUnavailable(t *testing.T) {
	srv, url, path, db := newSource(t)
	ctx := context.Background()
	opts := replica.Options{Interval: time.Hour, Owner: testOwner, IdleTimeout: 100 * time.Millisecond}
	rnd := rand.NewChaCha8([32]byte{3})
	rewrite(t, db, rnd, 1)
	rep, err := replica.Start(ctx, path, url, opts)
	require.NoError(t, err)
	require.NoError(t, rep.Sync(ctx))

	rewrite(t, db, rnd, 2)
	uploads := stalls(srv, func(r *http.Request) bool {
		return r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/meta/0000/")
	})
	err = s3fake.Within(t, "replication round", func() error { return rep.Sync(ctx) })
	require.Error(t, err)
	assert.Equal(t, wserr.Busy, wserr.CodeOf(err), "%v", err)
	assert.ErrorIs(t, err, remote.ErrUnavailable)
	assert.Equal(t, 1, uploads(), "the stalled upload ends the round")
	srv.SetStall(nil)
	require.NoError(t, rep.Sync(ctx), "the next round ships it")
	require.NoError(t, db.Close())
	require.NoError(t, rep.Close(ctx))

	for name, stalled := range map[string]func(r *http.Request) bool{
		"Listing":   func(r *http.Request) bool { return true },
		"Downloads": func(r *http.Request) bool { return r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, ".ltx") },
	} {
		out := filepath.Join(t.TempDir(), "restored.db")
		n := stalls(srv, stalled)
		err = s3fake.Within(t, "restore", func() error { return replica.Restore(ctx, url, out, opts) })
		require.Error(t, err, name)
		assert.Equal(t, wserr.Busy, wserr.CodeOf(err), "%s: %v", name, err)
		assert.ErrorIs(t, err, remote.ErrUnavailable, name)
		assert.Positive(t, n(), name)
		_, serr := os.Stat(out)
		assert.ErrorIs(t, serr, os.ErrNotExist, "%s: no database is left", name)
	}
	srv.SetStall(nil)
	out := filepath.Join(t.TempDir(), "restored.db")
	require.NoError(t, replica.Restore(ctx, url, out, opts))
	var rows int
	require.NoError(t, openDB(t, out).QueryRow(`SELECT count(*) FROM t`).Scan(&rows))
	assert.Equal(t, 2, rows)
}
