package index

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/wserr"
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

// TestViewEndedByItsContextMidReadIsCanceled: a read transaction whose
// context ends between two statements, so that database/sql rolls it back
// and the next statement fails with an uncoded "transaction has already
// been committed or rolled back", answers store.canceled.
func TestViewEndedByItsContextMidReadIsCanceled(t *testing.T) {
	db, err := Open(context.Background(), filepath.Join(t.TempDir(), "v.db"), Options{})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	err = db.View(ctx, func(tx *Tx) error {
		var n int
		if err := tx.GetContext(ctx, &n, `SELECT 7`); err != nil {
			return err
		}
		cancel()
		// Later reads, as a caller passing a context that does not end
		// (or none) for its statements makes, until database/sql has
		// rolled the transaction back.
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if err := tx.GetContext(context.Background(), &n, `SELECT 1`); err != nil {
				return fmt.Errorf("second read: %w", err)
			}
		}
		return errors.New("database/sql never rolled the read back")
	})
	assert.Equal(t, wserr.Canceled, wserr.CodeOf(err), "%v", err)
	assert.ErrorIs(t, err, context.Canceled)
}
