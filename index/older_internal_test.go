package index

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/pressly/goose/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/migrations"
	"github.com/wsstore/wsstore/wserr"
)

// TestReadOnlyOpenRefusesPendingMigrations: a store an older build wrote
// (here: migrated only to version 1) is refused by a read-only open with
// store.older_format, and upgraded by a writable one.
func TestReadOnlyOpenRefusesPendingMigrations(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	raw, err := sqlx.Open("sqlite", "file:"+path)
	require.NoError(t, err)
	p := testProvider(t, raw)
	_, err = p.UpTo(ctx, 1)
	require.NoError(t, err)
	require.NoError(t, raw.Close())

	_, err = Open(ctx, path, Options{ReadOnly: true})
	require.Error(t, err)
	assert.True(t, wserr.Is(err, wserr.OlderFormat), "%v", err)

	db, err := Open(ctx, path, Options{})
	require.NoError(t, err, "a writable open applies the pending migrations")
	require.NoError(t, db.Close())
	ro, err := Open(ctx, path, Options{ReadOnly: true})
	require.NoError(t, err)
	require.NoError(t, ro.Close())
}

// testProvider returns a goose provider of the store's migrations on raw,
// with the store's own version table, for tests that migrate by hand.
func testProvider(t *testing.T, raw *sqlx.DB) *goose.Provider {
	t.Helper()
	store, err := newVersionStore()
	require.NoError(t, err)
	p, err := goose.NewProvider(goose.DialectCustom, raw.DB, migrations.FS, goose.WithStore(store), goose.WithDisableGlobalRegistry(true))
	require.NoError(t, err)
	return p
}
