package index

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/jmoiron/sqlx"
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

// TestReadStatementsArePreparedOnce: a query run in a read transaction is
// prepared after it and reused by later ones, with the same results, bound
// once per transaction however often it runs; preparing gives up on a
// pool whose connections are all held, and leaves the query to run
// unprepared until a later turn.
func TestReadStatementsArePreparedOnce(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(t.TempDir(), "s.db"), Options{ReadConns: 1})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	const q = `SELECT value FROM meta WHERE key = ?`
	read := func() string {
		var v string
		require.NoError(t, db.View(ctx, func(tx *Tx) error { return tx.GetContext(ctx, &v, q, "format_version") }))
		return v
	}

	// Preparing waits a millisecond for a free connection: on a loaded
	// machine a turn may pass before it is prepared.
	preparedAfter := func(query string, run func()) *sqlx.Stmt {
		for range 100 {
			run()
			db.readStmts.mu.Lock()
			st := db.readStmts.stmts[query]
			db.readStmts.mu.Unlock()
			if st != nil {
				return st
			}
		}
		return nil
	}
	want := read()
	first := preparedAfter(q, func() { read() })
	require.NotNil(t, first, "prepared once a transaction ended")
	assert.Equal(t, want, read())
	db.readStmts.mu.Lock()
	assert.Same(t, first, db.readStmts.stmts[q])
	db.readStmts.mu.Unlock()
	require.NoError(t, db.View(ctx, func(tx *Tx) error {
		for range 1000 {
			var v string
			if err := tx.GetContext(ctx, &v, q, "format_version"); err != nil {
				return err
			}
		}
		assert.Len(t, tx.bound, 1, "bound once, not once per run")
		return nil
	}))

	// Hold the only read connection while another query waits to be
	// prepared: prepareIdle gives up instead of waiting for it.
	const q2 = `SELECT count(*) FROM meta`
	held, release := make(chan struct{}), make(chan struct{})
	done := make(chan error)
	go func() {
		done <- db.View(ctx, func(tx *Tx) error {
			close(held)
			<-release
			return nil
		})
	}()
	<-held
	assert.Nil(t, db.readStmts.lookup(q2), "not prepared yet: noted as pending")
	db.readStmts.prepareIdle(ctx, db.read)
	db.readStmts.mu.Lock()
	_, prepared := db.readStmts.stmts[q2]
	db.readStmts.mu.Unlock()
	assert.False(t, prepared, "no connection was free")
	close(release)
	require.NoError(t, <-done)

	assert.NotNil(t, preparedAfter(q2, func() {
		var n int
		require.NoError(t, db.View(ctx, func(tx *Tx) error { return tx.GetContext(ctx, &n, q2) }))
		assert.Positive(t, n)
	}), "prepared on a later turn")
}
