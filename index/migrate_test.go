package index

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/pressly/goose/v3/database"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestVersionStoreRecordsOnce covers the backstop for a migration of plain
// data statements, which would not fail on its own when a concurrent opener
// applied it first: recording its version fails instead, in its
// transaction.
func TestVersionStoreRecordsOnce(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(t.TempDir(), "store.db"), Options{})
	require.NoError(t, err)
	defer func() {
		assert.NoError(t, db.IntegrityCheck(ctx))
		assert.NoError(t, db.Close())
	}()
	s, err := newVersionStore()
	require.NoError(t, err)

	ok, err := s.TableExists(ctx, db.write.DB)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.NoError(t, s.CreateVersionTable(ctx, db.write.DB), "creating an existing table is a no-op")

	latest, err := s.GetLatestVersion(ctx, db.write.DB)
	require.NoError(t, err)
	err = s.Insert(ctx, db.write.DB, database.InsertRequest{Version: latest})
	assert.True(t, errors.Is(err, errApplied), "%v", err)
	assert.NoError(t, s.Insert(ctx, db.write.DB, database.InsertRequest{Version: 0}), "the zero row is written once, quietly")

	var n int
	require.NoError(t, db.write.GetContext(ctx, &n, `SELECT count(*) FROM goose_db_version WHERE version_id IN (0, ?)`, latest))
	assert.Equal(t, 2, n)
}
