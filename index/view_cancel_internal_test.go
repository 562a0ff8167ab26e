package index

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestViewEndedByItsContextAfterItsReads: a read transaction whose
// context ends after its function read all it needed, so that
// database/sql rolls it back first, returns what the function returned,
// not an uncoded "rollback: transaction has already been committed or
// rolled back".
func TestViewEndedByItsContextAfterItsReads(t *testing.T) {
	db, err := Open(context.Background(), filepath.Join(t.TempDir(), "v.db"), Options{})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	var n int
	err = db.View(ctx, func(tx *Tx) error {
		if err := tx.GetContext(ctx, &n, `SELECT 7`); err != nil {
			return err
		}
		cancel()
		// Until database/sql has rolled the transaction back on its own.
		for {
			var x int
			if err := tx.Tx.GetContext(context.Background(), &x, `SELECT 1`); errors.Is(err, sql.ErrTxDone) {
				return nil
			}
		}
	})
	assert.NoError(t, err)
	assert.Equal(t, 7, n)
}
