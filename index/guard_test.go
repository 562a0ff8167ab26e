package index_test

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/wserr"
)

// TestUpdateEndedBySQLite: a full database makes SQLite roll back the
// whole transaction of a one-row insert. A function that passes over
// that error and goes on writing, by any of Tx's ways, commits nothing:
// neither what it wrote before nor after, and its Update fails with the
// full disk's code. The next Update works as before.
func TestUpdateEndedBySQLite(t *testing.T) {
	ctx := context.Background()
	db := storetest.OpenDB(t, index.Options{})
	require.NoError(t, db.Update(ctx, func(tx *index.Tx) error {
		_, err := tx.ExecContext(ctx, `CREATE TABLE g (v BLOB)`)
		return err
	}))
	values := func() []string {
		var vs []string
		require.NoError(t, db.View(ctx, func(tx *index.Tx) error {
			return tx.SelectContext(ctx, &vs, `SELECT v FROM g ORDER BY rowid`)
		}))
		return vs
	}
	// fill makes the next insert that needs a page fail with SQLITE_FULL,
	// which ends the transaction, and passes over that error.
	fill := func(tx *index.Tx) {
		var n int
		require.NoError(t, tx.GetContext(ctx, &n, `PRAGMA page_count`))
		_, err := tx.ExecContext(ctx, `PRAGMA max_page_count = `+strconv.Itoa(n))
		require.NoError(t, err)
		_, err = tx.ExecContext(ctx, `INSERT INTO g VALUES (randomblob(100000))`)
		require.Error(t, err)
	}
	unlimit := func() {
		require.NoError(t, db.Exec(ctx, `PRAGMA max_page_count = 4294967294`))
	}

	tests := []struct {
		name  string
		after func(tx *index.Tx) error // a write after the passed-over error
	}{
		{"Exec", func(tx *index.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO g VALUES ('after')`)
			return err
		}},
		{"ExecOfSQLx", func(tx *index.Tx) error { // sqlx's, past Tx's checks
			_, err := tx.Tx.ExecContext(ctx, `INSERT INTO g VALUES ('after')`)
			return err
		}},
		{"QueryRow", func(tx *index.Tx) error {
			var v string
			return tx.QueryRowContext(ctx, `INSERT INTO g VALUES ('after') RETURNING v`).Scan(&v)
		}},
		{"Queryx", func(tx *index.Tx) error {
			rows, err := tx.QueryxContext(ctx, `INSERT INTO g VALUES ('after') RETURNING v`)
			if err != nil {
				return err
			}
			return rows.Close()
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var afterErr error
			err := db.Update(ctx, func(tx *index.Tx) error {
				_, err := tx.ExecContext(ctx, `INSERT INTO g VALUES ('before')`)
				require.NoError(t, err)
				fill(tx)
				afterErr = tc.after(tx)
				_, _ = tx.ExecContext(ctx, `INSERT INTO g VALUES ('last')`)
				return nil
			})
			unlimit()
			requireCode(t, err, wserr.DiskFull)
			assert.ErrorContains(t, err, "nothing of it was committed")
			assert.Error(t, afterErr, "a write after the transaction ended")
			assert.Empty(t, values(), "nothing of the ended transaction commits")

			require.NoError(t, db.Update(ctx, func(tx *index.Tx) error {
				_, err := tx.ExecContext(ctx, `INSERT INTO g VALUES ('next')`)
				return err
			}))
			assert.Equal(t, []string{"next"}, values())
			require.NoError(t, db.Update(ctx, func(tx *index.Tx) error {
				_, err := tx.ExecContext(ctx, `DELETE FROM g`)
				return err
			}))
		})
	}

	// Whatever error the function returns after the end, its Update
	// fails with the end's.
	returns := []struct {
		name string
		fn   func(tx *index.Tx) error
	}{
		{"TheEnd", func(tx *index.Tx) error {
			fill(tx)
			_, err := tx.ExecContext(ctx, `INSERT INTO g VALUES ('after')`)
			return err
		}},
		{"ALaterError", func(tx *index.Tx) error { // the refused commit's
			fill(tx)
			_, err := tx.Tx.ExecContext(ctx, `INSERT INTO g VALUES ('after')`)
			return err
		}},
		{"TheCausePastTx", func(tx *index.Tx) error { // Tx never saw it
			var n int
			require.NoError(t, tx.GetContext(ctx, &n, `PRAGMA page_count`))
			_, err := tx.ExecContext(ctx, `PRAGMA max_page_count = `+strconv.Itoa(n))
			require.NoError(t, err)
			_, err = tx.Tx.ExecContext(ctx, `INSERT INTO g VALUES (randomblob(100000))`)
			return err
		}},
	}
	for _, tc := range returns {
		t.Run("Returns"+tc.name, func(t *testing.T) {
			err := db.Update(ctx, tc.fn)
			unlimit()
			requireCode(t, err, wserr.DiskFull)
			assert.ErrorContains(t, err, "nothing of it was committed")
			assert.Empty(t, values())
		})
	}
}

// TestUpdateNotEndedBySQLite: errors on which SQLite undoes only the
// statement (a constraint, a full database met by a statement that
// keeps its own journal) and savepoints rolled back to do not end a
// transaction: the rest of it commits.
func TestUpdateNotEndedBySQLite(t *testing.T) {
	ctx := context.Background()
	db := storetest.OpenDB(t, index.Options{})
	exec := func(tx *index.Tx, q string) error {
		_, err := tx.ExecContext(ctx, q)
		return err
	}
	require.NoError(t, db.Update(ctx, func(tx *index.Tx) error {
		return exec(tx, `CREATE TABLE u (k TEXT PRIMARY KEY, v BLOB)`)
	}))
	require.NoError(t, db.Update(ctx, func(tx *index.Tx) error {
		require.NoError(t, exec(tx, `INSERT INTO u VALUES ('a', 'x')`))
		require.Error(t, exec(tx, `INSERT INTO u VALUES ('a', 'again')`))
		failed, err := tx.Savepoint(ctx, func() error {
			require.NoError(t, exec(tx, `INSERT INTO u VALUES ('undone', 'x')`))
			return errors.New("injected")
		})
		require.NoError(t, err)
		require.Error(t, failed)
		var n int
		require.NoError(t, tx.GetContext(ctx, &n, `PRAGMA page_count`))
		require.NoError(t, exec(tx, `PRAGMA max_page_count = `+strconv.Itoa(n)))
		// Many rows from one statement: SQLite undoes just the statement.
		require.Error(t, exec(tx, `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 50)
			INSERT INTO u SELECT 'big' || i, randomblob(10000) FROM n`))
		require.NoError(t, exec(tx, `INSERT INTO u VALUES ('b', 'x')`))
		return nil
	}))
	require.NoError(t, db.Exec(ctx, `PRAGMA max_page_count = 4294967294`))
	var keys []string
	require.NoError(t, db.View(ctx, func(tx *index.Tx) error {
		return tx.SelectContext(ctx, &keys, `SELECT k FROM u ORDER BY k`)
	}))
	assert.Equal(t, []string{"a", "b"}, keys)
}
