package index

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/pressly/goose/v3/database"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/wserr"
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

// endingAfter is a context that ends the n-th time its Err is asked for,
// so that a sweep over n ends a call at each place it checks.
type endingAfter struct {
	context.Context
	cancel context.CancelFunc
	n      atomic.Int64
}

func (c *endingAfter) Err() error {
	if c.n.Add(-1) < 0 {
		c.cancel()
	}
	return c.Context.Err()
}

// TestOpenEndedWhileMigratingIsCanceled: a context that ends while a new
// store's migrations run fails Open with store.canceled, not with the
// store.internal of goose's commit of a transaction database/sql rolled
// back when the context ended. database/sql rolls back as the context
// ends, in a goroutine of its own, so the sweep is made three times.
func TestOpenEndedWhileMigratingIsCanceled(t *testing.T) {
	for range 3 {
		for n := int64(0); ; n++ {
			ctx, cancel := context.WithCancel(context.Background())
			c := &endingAfter{Context: ctx, cancel: cancel}
			c.n.Store(n)
			db, err := Open(c, filepath.Join(t.TempDir(), "store.db"), Options{})
			cancel()
			if err == nil {
				require.NoError(t, db.Close())
				break
			}
			require.Equal(t, wserr.Canceled, wserr.CodeOf(err), "ended at check %d: %v", n, err)
		}
	}
}
