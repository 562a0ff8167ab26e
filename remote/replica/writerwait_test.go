package replica_test

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/remote/replica"
	"github.com/wsstore/wsstore/remote/s3fake"
)

// TestFirstSyncWriterWait measures how long a writer committing every
// 10 ms waits for the write lock during a first sync that ships the whole
// database (the WAL started over since the replica's last file), for a
// database of WSSTORE_REPLICA_WAIT_MB megabytes; it runs only when that
// is set, and reports, asserting nothing of time.
func TestFirstSyncWriterWait(t *testing.T) {
	mb, _ := strconv.Atoi(os.Getenv("WSSTORE_REPLICA_WAIT_MB"))
	if mb <= 0 {
		t.Skip("set WSSTORE_REPLICA_WAIT_MB to measure")
	}
	awsTestEnv(t)
	m := s3fake.StartMoto(t) // the whole database goes up in parts
	m.CreateBucket("wsb")
	url := "s3://wsb/meta?endpoint=" + m.URL
	path := filepath.Join(t.TempDir(), "wsstore.db")
	db := openDB(t, path)
	ctx := context.Background()
	rnd := rand.NewChaCha8([32]byte{10})
	rows := mb * 1024 / 4
	tx, err := db.Begin()
	require.NoError(t, err)
	v := make([]byte, 4096)
	for id := range rows {
		_, _ = rnd.Read(v)
		_, err := tx.Exec(`INSERT INTO t (id, v) VALUES (?, ?)`, id, v)
		require.NoError(t, err)
	}
	require.NoError(t, tx.Commit())
	shipThenStartLogOver(t, path, url, db, rnd)

	writer := openWriter(t, path, 60000)
	_, err = writer.Exec(`CREATE TABLE IF NOT EXISTS lat (id INTEGER PRIMARY KEY, at INTEGER)`)
	require.NoError(t, err)
	stop := make(chan struct{})
	longest := make(chan time.Duration, 1)
	go func() {
		var most time.Duration
		defer func() { longest <- most }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			began := time.Now()
			conn, err := writer.Conn(ctx)
			if err != nil {
				return
			}
			_, err = conn.ExecContext(ctx, `BEGIN IMMEDIATE`)
			most = max(most, time.Since(began))
			if err == nil {
				_, _ = conn.ExecContext(ctx, `INSERT INTO lat (at) VALUES (?)`, began.UnixNano())
				_, _ = conn.ExecContext(ctx, `COMMIT`)
			}
			conn.Close()
			time.Sleep(10 * time.Millisecond)
		}
	}()
	time.Sleep(100 * time.Millisecond)
	began := time.Now()
	rep, err := replica.Start(ctx, path, url, snapshotDaily(replica.Options{Interval: time.Hour, Owner: testOwner}))
	require.NoError(t, err)
	require.NoError(t, rep.Sync(ctx))
	took := time.Since(began)
	time.Sleep(100 * time.Millisecond)
	close(stop)
	most := <-longest
	require.NoError(t, rep.Close(ctx))
	fi, err := os.Stat(path)
	require.NoError(t, err)
	t.Logf("database %d MB: first sync %s, the writer waited at most %s for the write lock", fi.Size()>>20, took.Round(time.Millisecond), most.Round(time.Millisecond))
	assertRestores(t, url, db)
}
