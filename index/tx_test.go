package index_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/wserr"
)

// metaValue returns the meta value under key and whether it exists.
func metaValue(t *testing.T, db *index.DB, key string) (string, bool) {
	t.Helper()
	ctx := context.Background()
	var v string
	err := db.View(ctx, func(tx *index.Tx) error {
		return tx.GetContext(ctx, &v, `SELECT value FROM meta WHERE key = ?`, key)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return "", false
	}
	require.NoError(t, err)
	return v, true
}

func TestUpdate(t *testing.T) {
	ctx := context.Background()
	errFail := errors.New("fn failed")
	insert := func(tx *index.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES ('test.update', 'x')`)
		return err
	}
	tests := []struct {
		name      string
		fn        func(tx *index.Tx) error
		err       error // want errors.Is(err, this)
		panics    bool
		committed bool
	}{
		{name: "OK", fn: insert, committed: true},
		{name: "RollbackOnError", fn: func(tx *index.Tx) error {
			require.NoError(t, insert(tx))
			return errFail
		}, err: errFail},
		{name: "RollbackOnWrappedError", fn: func(tx *index.Tx) error {
			require.NoError(t, insert(tx))
			return fmt.Errorf("step: %w", errFail)
		}, err: errFail},
		{name: "RollbackOnSQLError", fn: func(tx *index.Tx) error {
			require.NoError(t, insert(tx))
			return insert(tx) // duplicate key
		}},
		{name: "RollbackOnPanic", fn: func(tx *index.Tx) error {
			require.NoError(t, insert(tx))
			panic("boom")
		}, panics: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := storetest.OpenDB(t, index.Options{})
			switch {
			case tt.panics:
				assert.PanicsWithValue(t, "boom", func() { _ = db.Update(ctx, tt.fn) }, "the panic is re-raised")
			case tt.committed:
				assert.NoError(t, db.Update(ctx, tt.fn))
			default:
				err := db.Update(ctx, tt.fn)
				require.Error(t, err)
				if tt.err != nil {
					assert.ErrorIs(t, err, tt.err)
				}
			}
			_, ok := metaValue(t, db, "test.update")
			assert.Equal(t, tt.committed, ok, "row committed")

			// The single write connection is free again: a failed or
			// panicking Update must not leak its transaction.
			done := make(chan error, 1)
			go func() {
				done <- db.Update(ctx, func(tx *index.Tx) error {
					_, err := tx.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES ('test.after', 'y')`)
					return err
				})
			}()
			select {
			case err := <-done:
				require.NoError(t, err)
			case <-time.After(10 * time.Second):
				t.Fatal("write connection still held after Update returned")
			}
			v, ok := metaValue(t, db, "test.after")
			assert.True(t, ok)
			assert.Equal(t, "y", v)
		})
	}
}

func TestUpdateCanceledContext(t *testing.T) {
	db := storetest.OpenDB(t, index.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	called := false
	err := db.Update(ctx, func(tx *index.Tx) error { called = true; return nil })
	assert.ErrorIs(t, err, context.Canceled)
	assert.False(t, called)
}

// A write transaction runs its statements without the context's
// cancellation and checks it itself: a context that ends midway fails the
// next statement with its error, and one that ends after the last
// statement keeps the transaction from committing. Either way nothing is
// written and the write connection is free again.
func TestUpdateContextEndsMidway(t *testing.T) {
	bg := context.Background()
	for _, at := range []string{"before a statement", "before commit"} {
		t.Run(at, func(t *testing.T) {
			db := storetest.OpenDB(t, index.Options{})
			ctx, cancel := context.WithCancel(bg)
			var stmtErr error
			err := db.Update(ctx, func(tx *index.Tx) error {
				_, err := tx.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES ('test.first', 'x')`)
				require.NoError(t, err)
				cancel()
				if at == "before a statement" {
					_, stmtErr = tx.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES ('test.second', 'y')`)
					return stmtErr
				}
				return nil
			})
			assert.ErrorIs(t, err, context.Canceled)
			_, coded := errors.AsType[*wserr.Error](err)
			assert.True(t, coded, "store.canceled, not a bare context error: %v", err)
			assert.Equal(t, wserr.Canceled, wserr.CodeOf(err))
			if at == "before a statement" {
				assert.ErrorIs(t, stmtErr, context.Canceled, "the statement after the end fails with it")
			}
			for _, key := range []string{"test.first", "test.second"} {
				_, ok := metaValue(t, db, key)
				assert.False(t, ok, "%s committed", key)
			}
			require.NoError(t, db.Update(bg, func(tx *index.Tx) error {
				_, err := tx.ExecContext(bg, `INSERT INTO meta (key, value) VALUES ('test.after', 'z')`)
				return err
			}))
			_, ok := metaValue(t, db, "test.after")
			assert.True(t, ok)
		})
	}
}

// goroutinesCreated returns how many goroutines the process has started.
func goroutinesCreated() uint64 {
	s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// A write transaction under a context that can end starts no goroutine
// for its statements. 100 transactions of 5 statements and 5 queries
// each would start 1,800 in the driver and database/sql; now they start
// 600: the one database/sql starts for every transaction and the one for
// every query's rows in a transaction, whatever the context.
func TestUpdateStartsNoWatchers(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	db := storetest.OpenDB(t, index.Options{})
	update := func() {
		require.NoError(t, db.Update(ctx, func(tx *index.Tx) error {
			for i := range 5 {
				if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO meta (key, value) VALUES ('test.n', ?)`, i); err != nil {
					return err
				}
				var v string
				if err := tx.GetContext(ctx, &v, `SELECT value FROM meta WHERE key = 'test.n'`); err != nil {
					return err
				}
			}
			return nil
		}))
	}
	update() // prepares the statements
	before := goroutinesCreated()
	for range 100 {
		update()
	}
	assert.LessOrEqual(t, goroutinesCreated()-before, uint64(650), "goroutines started by 100 write transactions of 5 statements and 5 queries")
}

func TestView(t *testing.T) {
	ctx := context.Background()
	db := storetest.OpenDB(t, index.Options{})
	tests := []struct {
		name string
		stmt string
	}{
		{name: "ReadOnly/Insert", stmt: `INSERT INTO meta (key, value) VALUES ('test.view', 'x')`},
		{name: "ReadOnly/Update", stmt: `UPDATE meta SET value = '99' WHERE key = 'format_version'`},
		{name: "ReadOnly/Delete", stmt: `DELETE FROM meta`},
		{name: "ReadOnly/CreateTable", stmt: `CREATE TABLE test_view (x)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := db.View(ctx, func(tx *index.Tx) error {
				assert.False(t, tx.Writable())
				_, err := tx.ExecContext(ctx, tt.stmt)
				return index.Translate(err)
			})
			requireCode(t, err, wserr.ReadOnly)
		})
	}
	_, ok := metaValue(t, db, "test.view")
	assert.False(t, ok)
	v, _ := metaValue(t, db, "format_version")
	assert.NotEqual(t, "99", v)

	t.Run("ErrorReturned", func(t *testing.T) {
		errFail := errors.New("fn failed")
		assert.ErrorIs(t, db.View(ctx, func(tx *index.Tx) error { return errFail }), errFail)
	})
	t.Run("PanicReraised", func(t *testing.T) {
		assert.PanicsWithValue(t, "boom", func() {
			_ = db.View(ctx, func(tx *index.Tx) error { panic("boom") })
		})
	})
}

// TestViewSnapshot shows a View sees one committed snapshot: a write
// committed while it runs is not visible inside it, and does not wait for
// it.
func TestViewSnapshot(t *testing.T) {
	ctx := context.Background()
	db := storetest.OpenDB(t, index.Options{})
	var before, inside int
	require.NoError(t, db.View(ctx, func(tx *index.Tx) error {
		if err := tx.GetContext(ctx, &before, `SELECT count(*) FROM meta`); err != nil {
			return err
		}
		require.NoError(t, db.Update(ctx, func(tx *index.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES ('test.snapshot', 'x')`)
			return err
		}))
		return tx.GetContext(ctx, &inside, `SELECT count(*) FROM meta`)
	}))
	assert.Equal(t, before, inside)
	_, ok := metaValue(t, db, "test.snapshot")
	assert.True(t, ok)
}

func TestTranslate(t *testing.T) {
	plain := errors.New("plain")
	assert.NoError(t, index.Translate(nil))
	assert.Same(t, plain, index.Translate(plain))

	t.Run("Busy", func(t *testing.T) {
		// Another connection (as another process would) holds the write
		// lock longer than this handle's busy timeout.
		ctx := context.Background()
		path := storetest.NewPath(t)
		storetest.OpenDBAt(t, path, index.Options{})
		other := storetest.OpenDBAt(t, path, index.Options{BusyTimeout: time.Millisecond})

		release := storetest.HoldWriteLock(t, path)

		err := other.Update(ctx, func(tx *index.Tx) error { return nil })
		requireCode(t, err, wserr.Busy)
		assert.Contains(t, wserr.MessageOf(err), "another connection (this process's or another's) holds a lock on the store",
			"the message says what the driver's \"database is locked (5)\" means")

		release()
		assert.NoError(t, other.Update(ctx, func(tx *index.Tx) error { return nil }))
	})
	t.Run("CanceledWhileWaiting", func(t *testing.T) {
		// A write whose context ends while it waits for the write lock
		// another connection holds, well within the busy timeout, was
		// ended, not refused: store.canceled, not store.busy.
		ctx := context.Background()
		path := storetest.NewPath(t)
		db := storetest.OpenDBAt(t, path, index.Options{BusyTimeout: time.Minute})

		release := storetest.HoldWriteLock(t, path)

		ended, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		err := db.Update(ended, func(tx *index.Tx) error { return nil })
		requireCode(t, err, wserr.Canceled)
		assert.True(t, errors.Is(err, context.DeadlineExceeded), "the cause stays in the chain: %v", err)
		release()
	})
}

// TestConcurrentUpdates runs read-modify-write transactions from many
// goroutines on two handles of one file (as two processes would) while
// others read. Every write transaction takes the write lock up front, so no
// increment is lost, and waiting for the lock never surfaces as busy.
func TestConcurrentUpdates(t *testing.T) {
	ctx := context.Background()
	path := storetest.NewPath(t)
	dbs := []*index.DB{
		storetest.OpenDBAt(t, path, index.Options{}),
		storetest.OpenDBAt(t, path, index.Options{}),
	}
	require.NoError(t, dbs[0].Update(ctx, func(tx *index.Tx) error {
		if _, err := tx.ExecContext(ctx, `CREATE TABLE test_counter (n INTEGER NOT NULL)`); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO test_counter (n) VALUES (0)`)
		return err
	}))

	const writers, rounds = 8, 40
	var wg sync.WaitGroup
	errs := make(chan error, 2*writers*rounds)
	for w := range writers {
		db := dbs[w%len(dbs)]
		wg.Go(func() {
			for range rounds {
				errs <- db.Update(ctx, func(tx *index.Tx) error {
					var n int
					if err := tx.GetContext(ctx, &n, `SELECT n FROM test_counter`); err != nil {
						return index.Translate(err)
					}
					_, err := tx.ExecContext(ctx, `UPDATE test_counter SET n = ?`, n+1)
					return index.Translate(err)
				})
			}
		})
		wg.Go(func() {
			last := -1
			for range rounds {
				errs <- db.View(ctx, func(tx *index.Tx) error {
					var n int
					if err := tx.GetContext(ctx, &n, `SELECT n FROM test_counter`); err != nil {
						return index.Translate(err)
					}
					if n < last {
						return fmt.Errorf("counter went back from %d to %d", last, n)
					}
					last = n
					return nil
				})
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
		assert.False(t, wserr.Is(err, wserr.Busy))
	}
	var n int
	require.NoError(t, dbs[1].View(ctx, func(tx *index.Tx) error {
		return tx.GetContext(ctx, &n, `SELECT n FROM test_counter`)
	}))
	assert.Equal(t, writers*rounds, n)
}

// TestTranslateCorruptionText: SQLite's corruption errors that a library
// flattened into text still leave with store.corrupt.
func TestTranslateCorruptionText(t *testing.T) {
	for _, msg := range []string{"step: database disk image is malformed", "open: file is not a database (26)"} {
		err := index.Translate(fmt.Errorf("wrapped flat: %v", errors.New(msg)))
		assert.Equal(t, wserr.Corrupt, wserr.CodeOf(err), msg)
	}
	assert.Equal(t, wserr.Internal, wserr.CodeOf(index.Translate(errors.New("other"))))
}

// TestWriterQueuesPastOneAttempt: a write lock another process holds for
// many of the write connection's short attempts at it is waited out (the
// retry loop around BEGIN IMMEDIATE), and the update commits; store.busy
// comes only once the busy timeout has passed.
func TestWriterQueuesPastOneAttempt(t *testing.T) {
	ctx := context.Background()
	path := storetest.NewPath(t)
	db := storetest.OpenDBAt(t, path, index.Options{})
	release := storetest.HoldWriteLock(t, path)

	attempts := 0
	released := make(chan struct{})
	go func() {
		defer close(released)
		// Held across several attempts: each waits at most 50 ms.
		time.Sleep(400 * time.Millisecond)
		release()
	}()
	err := db.Update(ctx, func(tx *index.Tx) error { attempts++; return nil })
	<-released
	require.NoError(t, err, "the writer queued until the lock was free")
	assert.Equal(t, 1, attempts, "fn runs once, after the lock is taken")
}
