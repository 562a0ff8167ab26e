package replica_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/remote/replica"
	"github.com/wsstore/wsstore/remote/s3fake"
)

// ltxMin returns the lowest first transaction of the level 0 files named
// by keys (paths or object keys, every LTX file of the map), 0 if none.
func ltxMin(t *testing.T, files map[string]int64) (lowest uint64) {
	t.Helper()
	for p := range files {
		if !strings.Contains(p, "/0000/") && !strings.Contains(p, "/ltx/0/") {
			continue
		}
		var lo, hi uint64
		_, err := fmt.Sscanf(filepath.Base(p), "%016x-%016x.ltx", &lo, &hi)
		require.NoError(t, err, p)
		if lowest == 0 || lo < lowest {
			lowest = lo
		}
	}
	return lowest
}

// ltxMax returns the highest last transaction of the level 0 files named
// by keys, 0 if none.
func ltxMax(t *testing.T, files map[string]int64) (highest uint64) {
	t.Helper()
	for p := range files {
		if !strings.Contains(p, "/0000/") && !strings.Contains(p, "/ltx/0/") {
			continue
		}
		var lo, hi uint64
		_, err := fmt.Sscanf(filepath.Base(p), "%016x-%016x.ltx", &lo, &hi)
		require.NoError(t, err, p)
		highest = max(highest, hi)
	}
	return highest
}

// shipUntilPruned ships transactions (write, then rep.Sync) until
// Litestream's local state holds none up to past, having merged them into
// level 1 on the replica and pruned them here, as a minute or so of
// replicating does with the default retention.
func shipUntilPruned(t *testing.T, path string, rep *replica.Replicator, past uint64, write func()) {
	t.Helper()
	ctx := context.Background()
	for deadline := time.Now().Add(90 * time.Second); ; {
		write()
		require.NoError(t, rep.Sync(ctx))
		if ltxMin(t, localLTX(t, path)) > past+1 {
			return
		}
		require.True(t, time.Now().Before(deadline), "the local state still holds transaction %d: %v", past+1, localLTX(t, path))
		time.Sleep(50 * time.Millisecond)
	}
}

// TestReplicateToAnotherURL: a database that replicated to one URL long
// enough for Litestream to prune its first transactions locally then
// replicates to another URL (a new replica, as docs/remote.md advises when
// two stores wrote one), later back to the first, which the local state
// has gone past in the second's numbering, and last to the first emptied
// by hand. Each replica restores the database as it was at its last
// transaction. Before, a replica that ended before the local state's first
// transaction failed every round with store.internal, Litestream looking
// for a file it had pruned.
func TestReplicateToAnotherURL(t *testing.T) {
	awsTestEnv(t)
	m := s3fake.StartMoto(t)
	m.CreateBucket("wsb")
	ctx := context.Background()
	first := "s3://wsb/first?endpoint=" + m.URL
	second := "s3://wsb/second?endpoint=" + m.URL
	path := filepath.Join(t.TempDir(), "wsstore.db")
	cl := s3Client(m.URL)
	db := openDB(t, path)
	rnd := rewriteRows(t, db, 7, 8)
	pruning := replica.Options{
		Interval:    time.Hour, // only Sync ships
		Levels:      []time.Duration{200 * time.Millisecond},
		L0Retention: time.Millisecond,
		Owner:       testOwner,
	}
	keeping := pruning
	keeping.Levels = []time.Duration{time.Hour}
	n := 0
	write := func() { rewrite(t, db, rnd, n%8); n++ }
	// rows is each row's value by id, as a hash, so that a difference
	// prints short.
	rows := func(db *sql.DB) map[int]string {
		t.Helper()
		out := map[int]string{}
		rs, err := db.Query(`SELECT id, v FROM t`)
		require.NoError(t, err)
		defer rs.Close()
		for rs.Next() {
			var id int
			var v []byte
			require.NoError(t, rs.Scan(&id, &v))
			out[id] = fmt.Sprintf("%x", sha256.Sum256(v))
		}
		require.NoError(t, rs.Err())
		return out
	}
	restoresLatest := func(url string) {
		t.Helper()
		out := filepath.Join(t.TempDir(), "restored.db")
		require.NoError(t, replica.Restore(ctx, url, out, replica.Options{}), url)
		assert.Equal(t, rows(db), rows(openDB(t, out)), "%s restores the database as at its last transaction", url)
	}
	ship := func(url string, opts replica.Options, transactions int, until func(rep *replica.Replicator)) {
		t.Helper()
		rep, err := replica.Start(ctx, path, url, opts)
		require.NoError(t, err, url)
		for range transactions {
			write()
			require.NoError(t, rep.Sync(ctx), "a round to %s", url)
		}
		if until != nil {
			until(rep)
		}
		require.NoError(t, rep.Close(ctx), url)
		restoresLatest(url)
	}

	ship(first, pruning, 1, func(rep *replica.Replicator) { shipUntilPruned(t, path, rep, 0, write) })
	firstLast := ltxMax(t, objects(t, cl, "wsb", "first/"))

	// A new replica, which the local state starts past. What is shipped
	// there is numbered from 1 again, and goes past the first's end.
	ship(second, keeping, int(firstLast)+3, nil)
	require.Greater(t, ltxMax(t, localLTX(t, path)), firstLast+1)

	// Back to the first: the local state holds a transaction numbered as
	// the first's next, but of the second's history.
	ship(first, keeping, 3, nil)

	// The first emptied by hand, once the local state is pruned again.
	ship(first, pruning, 1, func(rep *replica.Replicator) {
		shipUntilPruned(t, path, rep, ltxMin(t, localLTX(t, path)), write)
	})
	for key := range objects(t, cl, "wsb", "first/") {
		if strings.HasSuffix(key, ".ltx") {
			_, err := cl.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("wsb"), Key: aws.String(key)})
			require.NoError(t, err)
		}
	}
	ship(first, keeping, 3, nil)
}
