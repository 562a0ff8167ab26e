package cas_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/cas/storagetest"
	"github.com/wsstore/wsstore/index"
)

// openRawDB opens a new database for the storage conformance suite, which
// stores opaque bytes: when the test ends it is integrity-checked, not
// verified as a CAS.
func openRawDB(t *testing.T) *index.DB {
	t.Helper()
	db, err := index.Open(context.Background(), t.TempDir()+"/store.db", index.Options{})
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, db.IntegrityCheck(context.Background()), "integrity check")
		require.NoError(t, db.Close())
	})
	return db
}

// plainStorage hides every optional ability of the Storage it holds.
type plainStorage struct{ cas.Storage }

func TestSQLiteStorage(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) (*index.DB, cas.Storage) {
		return openRawDB(t), cas.NewSQLiteStorage()
	})
}

// TestFaultyStorage runs the suite through the fault-injecting wrapper
// with no fault armed, over a storage with the history ability and over
// one without.
func TestFaultyStorage(t *testing.T) {
	t.Run("History", func(t *testing.T) {
		storagetest.Run(t, func(t *testing.T) (*index.DB, cas.Storage) {
			st, faults := storagetest.NewFaulty(cas.NewSQLiteStorage())
			_, ok := st.(cas.HistoryStorage)
			require.True(t, ok, "the wrapper keeps the history ability")
			t.Cleanup(func() { require.Zero(t, faults.Fired()) })
			return openRawDB(t), st
		})
	})
	t.Run("Plain", func(t *testing.T) {
		storagetest.Run(t, func(t *testing.T) (*index.DB, cas.Storage) {
			st, _ := storagetest.NewFaulty(plainStorage{cas.NewSQLiteStorage()})
			_, ok := st.(cas.HistoryStorage)
			require.False(t, ok, "the wrapper adds no ability")
			return openRawDB(t), st
		})
	})
}
