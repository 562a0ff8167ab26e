// Package storetest opens throwaway stores for tests and proves them sound
// when each test ends: every store it opens gets SQLite's integrity and
// foreign-key checks and a full CAS verify in t.Cleanup.
package storetest

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
)

// OpenDB opens a new database in a temporary directory and closes it, after
// an integrity check, when the test ends.
func OpenDB(tb testing.TB, opts index.Options) *index.DB {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "store.db")
	db, err := index.Open(context.Background(), path, opts)
	require.NoError(tb, err)
	tb.Cleanup(func() {
		require.NoError(tb, db.IntegrityCheck(context.Background()), "integrity check")
		require.NoError(tb, db.Close())
	})
	return db
}

// OpenCAS opens a new database and a CAS on it; when the test ends every
// blob and chunk is re-verified, then the database integrity-checked.
func OpenCAS(tb testing.TB, opts cas.Options) (*index.DB, *cas.Store) {
	tb.Helper()
	db := OpenDB(tb, index.Options{})
	s, err := cas.New(db, opts)
	require.NoError(tb, err)
	tb.Cleanup(func() { VerifyCAS(tb, s) })
	return db, s
}

// VerifyCAS fails the test if any stored blob or chunk does not verify.
func VerifyCAS(tb testing.TB, s *cas.Store) {
	tb.Helper()
	rep, err := s.Verify(context.Background(), nil)
	require.NoError(tb, err, "cas verify")
	require.Empty(tb, rep.Problems, "cas verify")
}
