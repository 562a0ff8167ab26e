package index_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
)

// TestSavepoint: work in a savepoint that fails is undone and the
// transaction goes on to commit the rest; work that succeeds stays; a
// failure that ended the whole transaction is reported as the caller's
// to fail with, and nothing the transaction did commits.
func TestSavepoint(t *testing.T) {
	ctx := context.Background()
	db := storetest.OpenDB(t, index.Options{})
	exec := func(tx *index.Tx, q string) {
		_, err := tx.ExecContext(ctx, q)
		require.NoError(t, err)
	}
	require.NoError(t, db.Update(ctx, func(tx *index.Tx) error {
		exec(tx, `CREATE TABLE sp (v TEXT)`)
		return nil
	}))
	rows := func() []string {
		var vs []string
		require.NoError(t, db.View(ctx, func(tx *index.Tx) error {
			return tx.SelectContext(ctx, &vs, `SELECT v FROM sp ORDER BY v`)
		}))
		return vs
	}
	injected := errors.New("injected")

	require.NoError(t, db.Update(ctx, func(tx *index.Tx) error {
		exec(tx, `INSERT INTO sp VALUES ('a')`)
		failed, err := tx.Savepoint(ctx, func() error {
			exec(tx, `INSERT INTO sp VALUES ('undone')`)
			return injected
		})
		require.NoError(t, err)
		require.ErrorIs(t, failed, injected)
		failed, err = tx.Savepoint(ctx, func() error {
			exec(tx, `INSERT INTO sp VALUES ('b')`)
			return nil
		})
		require.NoError(t, err)
		require.NoError(t, failed)
		exec(tx, `INSERT INTO sp VALUES ('c')`)
		return nil
	}))
	assert.Equal(t, []string{"a", "b", "c"}, rows())

	err := db.Update(ctx, func(tx *index.Tx) error {
		exec(tx, `INSERT INTO sp VALUES ('d')`)
		failed, err := tx.Savepoint(ctx, func() error {
			exec(tx, `ROLLBACK`) // as SQLite ends a transaction on some errors
			return injected
		})
		assert.ErrorIs(t, failed, injected)
		return err
	})
	require.Error(t, err)
	assert.ErrorIs(t, err, injected)
	assert.Equal(t, []string{"a", "b", "c"}, rows(), "nothing of the ended transaction commits")
}
