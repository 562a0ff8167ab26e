package replica_test

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/remote/replica"
	"github.com/wsstore/wsstore/remote/s3fake"
	"github.com/wsstore/wsstore/wserr"
)

// damagedReplica replicates a database through six transactions, each
// shipped on its own, to a fake object store, and returns the store, the
// replica's URL and its level 0 keys (the first is the whole database at
// transaction 1). The files of higher levels are removed: a compaction
// that ran while the transactions were shipped (the store tries one at
// its start and again a second later when the database was not ready)
// would otherwise give a restore a path around the damaged file. What is
// left is a replica as it stands before its first compaction.
func damagedReplica(t *testing.T) (*s3fake.Server, string, []string) {
	t.Helper()
	srv, url, path, db := newSource(t)
	ctx := context.Background()
	rnd := rewriteRows(t, db, 2, 16)
	rep, err := replica.Start(ctx, path, url, replica.Options{Interval: time.Hour, Owner: testOwner})
	require.NoError(t, err)
	for i := range 6 {
		rewrite(t, db, rnd, i)
		require.NoError(t, rep.Sync(ctx))
	}
	require.NoError(t, db.Close())
	require.NoError(t, rep.Close(ctx))
	for _, k := range srv.Keys("wsb", "meta/") {
		if !strings.HasPrefix(k, "meta/0000/") {
			srv.SetObject("wsb", k, nil)
		}
	}
	keys := srv.Keys("wsb", "meta/0000/")
	require.GreaterOrEqual(t, len(keys), 6, "a file for each transaction")
	return srv, url, keys
}

// TestRestoreDamagedReplica: a replica whose files are missing, cut short
// or altered is store.corrupt, not store.busy; an object store that does
// not answer is store.busy; an empty replica store.not_found.
func TestRestoreDamagedReplica(t *testing.T) {
	restore := func(t *testing.T, url string) error {
		return replica.Restore(context.Background(), url, filepath.Join(t.TempDir(), "wsstore.db"), replica.Options{})
	}
	t.Run("OK", func(t *testing.T) {
		_, url, _ := damagedReplica(t)
		require.NoError(t, restore(t, url))
	})
	damage := []struct {
		name string
		fn   func(srv *s3fake.Server, keys []string)
	}{
		{"ErrMiddleFileMissing", func(srv *s3fake.Server, keys []string) { srv.SetObject("wsb", keys[3], nil) }},
		{"ErrFirstFileMissing", func(srv *s3fake.Server, keys []string) { srv.SetObject("wsb", keys[0], nil) }},
		{"ErrTruncated", func(srv *s3fake.Server, keys []string) {
			b, _ := srv.Object("wsb", keys[0])
			srv.SetObject("wsb", keys[0], b[:len(b)/2])
		}},
		{"ErrPageFlipped", func(srv *s3fake.Server, keys []string) {
			b, _ := srv.Object("wsb", keys[0])
			for i := len(b) / 3; i < len(b)/3+64; i++ {
				b[i] ^= 0xff
			}
			srv.SetObject("wsb", keys[0], b)
		}},
		{"ErrTrailerFlipped", func(srv *s3fake.Server, keys []string) {
			b, _ := srv.Object("wsb", keys[len(keys)-1])
			b[len(b)-3] ^= 0xff
			srv.SetObject("wsb", keys[len(keys)-1], b)
		}},
	}
	for _, tc := range damage {
		t.Run(tc.name, func(t *testing.T) {
			srv, url, keys := damagedReplica(t)
			tc.fn(srv, keys)
			err := restore(t, url)
			require.Error(t, err)
			assert.Equal(t, wserr.Corrupt, wserr.CodeOf(err), "%v", err)
			assert.NotContains(t, err.Error(), "unavailable")
		})
	}
	t.Run("ErrUnavailable", func(t *testing.T) {
		srv, url, _ := damagedReplica(t)
		for _, status := range []int{http.StatusServiceUnavailable, s3fake.Drop} {
			srv.SetFault(func(r *http.Request) int { return status })
			err := restore(t, url)
			require.Error(t, err)
			assert.Equal(t, wserr.Busy, wserr.CodeOf(err), "%v", err)
			assert.False(t, strings.HasPrefix(err.Error(), "restore "+url+": store.busy: get v0.3.x"), "Litestream's own prefixes are dropped: %v", err)
		}
	})
	t.Run("ErrEmpty", func(t *testing.T) {
		awsTestEnv(t)
		srv := s3fake.New("wsb")
		t.Cleanup(srv.Close)
		err := restore(t, "s3://wsb/none?endpoint="+srv.URL+"&region=us-east-1")
		assert.Equal(t, wserr.NotFound, wserr.CodeOf(err), "%v", err)
	})
}
