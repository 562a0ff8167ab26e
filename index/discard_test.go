package index_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/index"
)

// TestDiscardRemovesOnlyAnUnusedNewStore: Discard removes the database
// its Open created, with its log and index, but not one its Open found,
// one another connection has open, or one another opener wrote to.
func TestDiscardRemovesOnlyAnUnusedNewStore(t *testing.T) {
	ctx := context.Background()
	open := func(t *testing.T, path string) *index.DB {
		db, err := index.Open(ctx, path, index.Options{})
		require.NoError(t, err)
		return db
	}
	left := func(t *testing.T, dir string) []string {
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		return names
	}
	t.Run("OK", func(t *testing.T) {
		dir := t.TempDir()
		db := open(t, filepath.Join(dir, "wsstore.db"))
		require.NoError(t, db.Update(ctx, func(tx *index.Tx) error { return index.SetSetting(ctx, tx, "k", "v") }))
		assert.True(t, db.Discard())
		assert.Empty(t, left(t, dir))
	})
	t.Run("FoundNotCreated", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "wsstore.db")
		require.NoError(t, open(t, path).Close())
		assert.False(t, open(t, path).Discard())
		assert.FileExists(t, path)
	})
	t.Run("OpenElsewhere", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "wsstore.db")
		db := open(t, path)
		other := open(t, path)
		defer other.Close()
		assert.False(t, db.Discard())
		require.NoError(t, other.Exec(ctx, `CREATE TABLE later (x)`))
		require.NoError(t, other.Update(ctx, func(tx *index.Tx) error { return index.SetSetting(ctx, tx, "k", "v") }))
		require.NoError(t, other.Close())
		again := open(t, path)
		defer again.Close()
		require.NoError(t, again.View(ctx, func(tx *index.Tx) error {
			v, ok, err := index.Setting(ctx, tx, "k")
			assert.True(t, ok)
			assert.Equal(t, "v", v)
			return err
		}))
	})
	t.Run("WrittenElsewhere", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "wsstore.db")
		db := open(t, path)
		other := open(t, path)
		require.NoError(t, other.Exec(ctx, `INSERT INTO goose_db_version (version_id, is_applied) VALUES (99999, 0)`))
		require.NoError(t, other.Close())
		assert.False(t, db.Discard())
		assert.FileExists(t, path)
	})
}
