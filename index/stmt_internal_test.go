package index

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWriteStatementsArePreparedOnce: a query run in one write transaction
// is prepared after it and reused by the next, with the same results, also
// after a transaction that rolled back.
func TestWriteStatementsArePreparedOnce(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(t.TempDir(), "s.db"), Options{})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	const q = `INSERT INTO meta (key, value) VALUES (?, ?)`

	require.NoError(t, db.Update(ctx, func(tx *Tx) error {
		_, err := tx.ExecContext(ctx, q, "a", "1")
		return err
	}))
	db.stmts.mu.Lock()
	first := db.stmts.stmts[q]
	db.stmts.mu.Unlock()
	require.NotNil(t, first, "prepared once the transaction ended")

	boom := errors.New("boom")
	err = db.Update(ctx, func(tx *Tx) error {
		if _, err := tx.ExecContext(ctx, q, "b", "2"); err != nil {
			return err
		}
		return boom
	})
	require.ErrorIs(t, err, boom)
	require.NoError(t, db.Update(ctx, func(tx *Tx) error {
		_, err := tx.ExecContext(ctx, q, "c", "3")
		return err
	}))
	db.stmts.mu.Lock()
	assert.Same(t, first, db.stmts.stmts[q], "the same statement serves every transaction")
	db.stmts.mu.Unlock()

	var keys []string
	require.NoError(t, db.View(ctx, func(tx *Tx) error {
		return tx.SelectContext(ctx, &keys, `SELECT key FROM meta WHERE key IN ('a', 'b', 'c') ORDER BY key`)
	}))
	assert.Equal(t, []string{"a", "c"}, keys, "the rolled-back insert is gone, the others committed")
}
