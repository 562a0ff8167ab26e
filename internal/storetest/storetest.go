package storetest

import (
	"context"
	"database/sql"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
)

// NewPath returns the path of a database file, not yet created, in a
// temporary directory removed when the test ends. Tests that open, close and
// reopen a store by hand start from it and open it last with OpenDBAt.
func NewPath(tb testing.TB) string {
	tb.Helper()
	return filepath.Join(tb.TempDir(), "store.db")
}

// OpenDB opens a new database in a temporary directory. When the test ends
// it verifies every blob and chunk, integrity-checks the database and
// closes it.
func OpenDB(tb testing.TB, opts index.Options) *index.DB {
	tb.Helper()
	return OpenDBAt(tb, NewPath(tb), opts)
}

// OpenDBAt opens (creating if needed) the database at path, with the same
// checks as OpenDB when the test ends. The test must not close it itself.
func OpenDBAt(tb testing.TB, path string, opts index.Options) *index.DB {
	tb.Helper()
	db, err := index.Open(context.Background(), path, opts)
	require.NoError(tb, err)
	tb.Cleanup(func() {
		defer func() { require.NoError(tb, db.Close()) }()
		s, err := cas.New(db, cas.Options{})
		require.NoError(tb, err)
		VerifyCAS(tb, s)
		require.NoError(tb, db.IntegrityCheck(context.Background()), "integrity check")
	})
	return db
}

// OpenCAS opens a new database, as OpenDB does, and a CAS on it.
func OpenCAS(tb testing.TB, opts cas.Options) (*index.DB, *cas.Store) {
	tb.Helper()
	db := OpenDB(tb, index.Options{})
	s, err := cas.New(db, opts)
	require.NoError(tb, err)
	return db, s
}

// VerifyCAS fails the test if any stored blob or chunk does not verify.
func VerifyCAS(tb testing.TB, s *cas.Store) {
	tb.Helper()
	rep, err := s.Verify(context.Background(), nil)
	require.NoError(tb, err, "cas verify")
	require.Empty(tb, rep.Problems, "cas verify")
}

// HoldWriteLock takes the write lock of the database at path on a
// connection of its own, as another process holding a write transaction
// would, and returns what gives it back (a rollback; calling it again does
// nothing). The lock is given back, and the connection closed, when the
// test ends at the latest.
func HoldWriteLock(tb testing.TB, path string) (release func()) {
	tb.Helper()
	ctx := context.Background()
	raw, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)")
	require.NoError(tb, err)
	conn, err := raw.Conn(ctx)
	require.NoError(tb, err)
	_, err = conn.ExecContext(ctx, `BEGIN IMMEDIATE`)
	require.NoError(tb, err)
	var once sync.Once
	release = func() { once.Do(func() { _, _ = conn.ExecContext(ctx, `ROLLBACK`) }) }
	tb.Cleanup(func() {
		release()
		conn.Close()
		raw.Close()
	})
	return release
}
