package index

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/pressly/goose/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// migratedStore returns a store at the newest migration, opened raw, with
// the provider that migrates it and a reader of its recorded format.
func migratedStore(t *testing.T) (*sqlx.DB, *goose.Provider, func() string) {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.db")
	db, err := Open(ctx, path, Options{})
	require.NoError(t, err)
	require.NoError(t, db.Close())
	raw, err := sqlx.Open("sqlite", "file:"+path)
	require.NoError(t, err)
	t.Cleanup(func() { raw.Close() })
	format := func() string {
		var s string
		require.NoError(t, raw.GetContext(ctx, &s, `SELECT value FROM meta WHERE key = 'format_version'`))
		return s
	}
	return raw, testProvider(t, raw), format
}

// TestTreePatchesMigrationDownRefusesPatches: going back below format 2
// fails, changing nothing, while any patched tree or packed event payload
// exists, and works once none does.
func TestTreePatchesMigrationDownRefusesPatches(t *testing.T) {
	ctx := context.Background()
	raw, p, format := migratedStore(t)
	h := func(b byte) []byte { x := make([]byte, 32); x[0] = b; return x }
	_, err := raw.ExecContext(ctx, `INSERT INTO trees (hash, data, created) VALUES (?, x'01', 0), (?, x'0101', 0)`, h(1), h(2))
	require.NoError(t, err)
	_, err = raw.ExecContext(ctx, `UPDATE trees SET base = ? WHERE hash = ?`, h(1), h(2))
	require.NoError(t, err)

	require.Equal(t, "3", format())

	_, err = p.DownTo(ctx, 5)
	require.Error(t, err, "a patched tree exists")
	v, err := p.GetDBVersion(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 6, v)
	assert.Equal(t, "2", format())

	_, err = raw.ExecContext(ctx, `DELETE FROM trees WHERE base IS NOT NULL`)
	require.NoError(t, err)
	_, err = raw.ExecContext(ctx, `INSERT INTO events (run_id, seq, type, level, at, payload) VALUES ('r', 1, 'x', 'info', 0, x'0102')`)
	require.NoError(t, err)
	_, err = p.DownTo(ctx, 5)
	require.Error(t, err, "a packed event payload exists")
	assert.Equal(t, "2", format())

	_, err = raw.ExecContext(ctx, `DELETE FROM events`)
	require.NoError(t, err)
	_, err = p.DownTo(ctx, 5)
	require.NoError(t, err)
	assert.Equal(t, "1", format())
	var n int
	require.NoError(t, raw.GetContext(ctx, &n, `SELECT count(*) FROM trees`))
	assert.Equal(t, 1, n, "whole trees stay")
}

// TestEditDeltasMigrationDownRefusesEdits: going back below format 3
// fails, changing nothing, while any delta row holds an edit, and works
// once none does.
func TestEditDeltasMigrationDownRefusesEdits(t *testing.T) {
	ctx := context.Background()
	raw, p, format := migratedStore(t)
	h := func(b byte) []byte { x := make([]byte, 32); x[0] = b; return x }
	_, err := raw.ExecContext(ctx, `INSERT INTO blobs (hash, size, stored, codec, base, data, created) VALUES (?, 3, 3, 0, NULL, x'616263', 0), (?, 2, 7, 3, ?, x'77734501020000', 0)`, h(1), h(2), h(1))
	require.NoError(t, err)

	const edits = 24 // the migration that brought edits
	_, err = p.DownTo(ctx, edits-1)
	require.Error(t, err, "an edit exists")
	v, err := p.GetDBVersion(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, edits, v)
	assert.Equal(t, "3", format())

	_, err = raw.ExecContext(ctx, `UPDATE blobs SET data = x'28b52ffd' WHERE hash = ?`, h(2))
	require.NoError(t, err)
	_, err = p.DownTo(ctx, edits-1)
	require.NoError(t, err, "a zstd delta is format 2's")
	assert.Equal(t, "2", format())
}
