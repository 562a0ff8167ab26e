package replica_test

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/remote/replica"
	"github.com/wsstore/wsstore/remote/s3fake"
	"github.com/wsstore/wsstore/wserr"
)

// TestOneReplicatorPerDatabase: a second Start on a database another
// Replicator ships (another wsctl replicate on the store) is refused with
// store.busy before it touches Litestream's local state, which the two
// would otherwise rewrite under each other; once the first is closed, a
// Start succeeds and ships on.
func TestOneReplicatorPerDatabase(t *testing.T) {
	awsTestEnv(t)
	m := s3fake.StartMoto(t)
	m.CreateBucket("wsb")
	ctx := context.Background()
	url := "s3://wsb/meta?endpoint=" + m.URL
	path := filepath.Join(t.TempDir(), "wsstore.db")
	db := openDB(t, path)
	rnd := rand.NewChaCha8([32]byte{2})
	rewrite(t, db, rnd, 1)

	first, err := replica.Start(ctx, path, url, replica.Options{Owner: testOwner})
	require.NoError(t, err)
	require.NoError(t, first.Sync(ctx))
	_, err = replica.Start(ctx, path, "s3://wsb/other?endpoint="+m.URL, replica.Options{Owner: testOwner})
	require.Error(t, err, "a second replicator of the database")
	assert.Equal(t, wserr.Busy, wserr.CodeOf(err), "%v", err)
	assert.Contains(t, err.Error(), "another replicator")

	rewrite(t, db, rnd, 2)
	require.NoError(t, first.Sync(ctx))
	require.NoError(t, first.Close(ctx))

	second, err := replica.Start(ctx, path, url, replica.Options{Owner: testOwner})
	require.NoError(t, err, "the first is closed")
	rewrite(t, db, rnd, 3)
	require.NoError(t, second.Sync(ctx))
	require.NoError(t, second.Close(ctx))

	out := filepath.Join(t.TempDir(), "restored.db")
	require.NoError(t, replica.Restore(ctx, url, out, replica.Options{}))
	var n int
	require.NoError(t, openDB(t, out).QueryRow(`SELECT count(*) FROM t`).Scan(&n))
	assert.Equal(t, 3, n)
}
