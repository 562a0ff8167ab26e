package replica_test

import (
	"database/sql"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"

	"github.com/wsstore/wsstore/remote"
	"github.com/wsstore/wsstore/remote/s3fake"
)

// testOwner is the store the tests' databases replicate as.
var testOwner = remote.ReplicaOwner{Device: "0123456789abcdef"}

// awsTestEnv points the AWS SDK at the test credentials (s3fake.TestEnv).
func awsTestEnv(t *testing.T) { s3fake.TestEnv(t) }

// fakeReplica starts an object store of the test's own (bucket wsb) and
// returns it with the replica URL its prefix meta names.
func fakeReplica(t *testing.T) (*s3fake.Server, string) {
	t.Helper()
	awsTestEnv(t)
	srv := s3fake.New("wsb")
	t.Cleanup(srv.Close)
	return srv, "s3://wsb/meta?endpoint=" + srv.URL + "&region=us-east-1"
}

// newSource is fakeReplica with a new database to replicate there
// (openDB): the store, the replica URL, the database's path and a
// connection to it.
func newSource(t *testing.T) (srv *s3fake.Server, url, path string, db *sql.DB) {
	t.Helper()
	srv, url = fakeReplica(t)
	path = filepath.Join(t.TempDir(), "wsstore.db")
	return srv, url, path, openDB(t, path)
}

// rewriteRows rewrites rows 0 to n-1 of db with bytes from a generator
// seeded with seed, and returns the generator for the test's later
// writes.
func rewriteRows(t *testing.T, db *sql.DB, seed byte, n int) *rand.ChaCha8 {
	t.Helper()
	rnd := rand.NewChaCha8([32]byte{seed})
	for id := range n {
		rewrite(t, db, rnd, id)
	}
	return rnd
}

// s3Client is a client of the test's own for moto at url.
func s3Client(url string) *s3.Client {
	return s3.New(s3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(url),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
	})
}

// openDB opens a SQLite database in WAL mode at path with a table of
// 64 rows of 4 KiB.
func openDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(wal)")
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(1)
	_, err = db.Exec(`CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, v BLOB)`)
	require.NoError(t, err)
	return db
}

// rewrite replaces row id's value with 4 KiB of random bytes, in a
// transaction of its own.
func rewrite(t *testing.T, db *sql.DB, rnd *rand.ChaCha8, id int) {
	t.Helper()
	require.NoError(t, writeRow(db, rnd, id))
}

// openWriter opens a second connection to the database at path, one at a
// time, waiting busyMS milliseconds for the write lock (0: one attempt),
// closed when t ends.
func openWriter(t *testing.T, path string, busyMS int) *sql.DB {
	t.Helper()
	writer, err := sql.Open("sqlite", fmt.Sprintf("file:%s?_pragma=busy_timeout(%d)", path, busyMS))
	require.NoError(t, err)
	t.Cleanup(func() { writer.Close() })
	writer.SetMaxOpenConns(1)
	return writer
}

// writeRow writes row id of db's table t with 4 KiB from rnd.
func writeRow(db *sql.DB, rnd *rand.ChaCha8, id int) error {
	v := make([]byte, 4096)
	_, _ = rnd.Read(v)
	_, err := db.Exec(`INSERT INTO t (id, v) VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET v = excluded.v`, id, v)
	return err
}
