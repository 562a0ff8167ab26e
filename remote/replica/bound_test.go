package replica_test

import (
	"context"
	"os"
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

// objects returns the size of every object under prefix, by key.
func objects(t *testing.T, cl *s3.Client, bucket, prefix string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	p := s3.NewListObjectsV2Paginator(cl, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		require.NoError(t, err)
		for _, o := range page.Contents {
			out[aws.ToString(o.Key)] = aws.ToInt64(o.Size)
		}
	}
	return out
}

// localLTX returns the size of every LTX file Litestream keeps beside the
// database at path, by path.
func localLTX(t *testing.T, path string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	dir := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+"-litestream")
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".ltx") {
			if fi, err := d.Info(); err == nil {
				out[p] = fi.Size()
			}
		}
		return nil
	})
	return out
}

func total(m map[string]int64) (n int64) {
	for _, v := range m {
		n += v
	}
	return n
}

// TestReplicaStaysBounded: 500 transactions, each shipped on its own,
// rewrite a database of 64 rows over and over. Once compaction, the
// snapshot and retention have run, the replica holds a snapshot and the
// level 1 files after the snapshot before it (two or three at these
// intervals, each at most the database's size), and Litestream's local
// state the last transaction's file, where every transaction stayed a
// file of its own on both sides; a restore still has the last
// transaction.
func TestReplicaStaysBounded(t *testing.T) {
	awsTestEnv(t)
	m := s3fake.StartMoto(t)
	m.CreateBucket("wsb")
	cl := s3Client(m.URL)
	ctx := context.Background()
	url := "s3://wsb/meta?endpoint=" + m.URL
	path := filepath.Join(t.TempDir(), "wsstore.db")
	db := openDB(t, path)
	rnd := rewriteRows(t, db, 1, 64)
	opts := replica.Options{
		Interval:          time.Hour, // only Sync ships
		Levels:            []time.Duration{500 * time.Millisecond},
		SnapshotInterval:  time.Second,
		SnapshotRetention: time.Millisecond,
		L0Retention:       time.Millisecond,
		Owner:             testOwner,
	}
	rep, err := replica.Start(ctx, path, url, opts)
	require.NoError(t, err)
	const writes = 500
	for i := range writes {
		rewrite(t, db, rnd, i%64)
		require.NoError(t, rep.Sync(ctx))
	}
	fi, err := os.Stat(path)
	require.NoError(t, err)
	dbSize := fi.Size()

	// The monitors run on their own clocks: wait until a pass has left
	// the replica in bounds (or give up and report the counts).
	var remote, local map[string]int64
	within := func() bool {
		remote, local = objects(t, cl, "wsb", "meta/"), localLTX(t, path)
		return len(remote) <= 12 && total(remote) <= 5*dbSize && len(local) <= 2 && total(local) <= dbSize
	}
	for deadline := time.Now().Add(90 * time.Second); !within() && time.Now().Before(deadline); {
		time.Sleep(200 * time.Millisecond)
	}
	assert.LessOrEqual(t, len(remote), 12, "replica files after %d transactions: %v", writes, remote)
	assert.LessOrEqual(t, total(remote), 5*dbSize, "replica bytes, database %d bytes", dbSize)
	assert.LessOrEqual(t, len(local), 2, "local state files: %v", local)
	assert.LessOrEqual(t, total(local), dbSize, "local state bytes, database %d bytes", dbSize)

	t.Logf("replica %d files %d bytes, local %d files %d bytes, database %d bytes", len(remote), total(remote), len(local), total(local), dbSize)
	// Durability: the last transaction is on the replica.
	var want []byte
	require.NoError(t, db.QueryRow(`SELECT v FROM t WHERE id = ?`, (writes-1)%64).Scan(&want))
	require.NoError(t, db.Close())
	require.NoError(t, rep.Close(ctx))
	restored := filepath.Join(t.TempDir(), "wsstore.db")
	require.NoError(t, replica.Restore(ctx, url, restored, replica.Options{}))
	rdb := openDB(t, restored)
	var got []byte
	require.NoError(t, rdb.QueryRow(`SELECT v FROM t WHERE id = ?`, (writes-1)%64).Scan(&got))
	assert.Equal(t, want, got, "the last transaction shipped is restored")
}
