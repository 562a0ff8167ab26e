package storetest

import (
	"context"
	"database/sql"
	"testing"

	"github.com/stretchr/testify/require"
	"modernc.org/sqlite"
)

// PagesRead runs q with args on a connection of its own to the database
// file at path, read-only, reads every row, and returns the pages SQLite
// fetched for it (its page cache's hits plus misses): how much of the
// store the statement reads, whatever the time it takes. A test replays a
// statement it recorded (Statements) to prove that its cost does not grow
// with rows it does not return.
func PagesRead(tb testing.TB, path, q string, args ...any) int {
	tb.Helper()
	ctx := context.Background()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	require.NoError(tb, err)
	defer db.Close()
	conn, err := db.Conn(ctx)
	require.NoError(tb, err)
	defer conn.Close()
	counters := func(reset bool) (n int) {
		require.NoError(tb, conn.Raw(func(dc any) error {
			st := dc.(sqlite.DBStatus)
			for _, op := range []sqlite.DBStatusOp{sqlite.DBStatusCacheHit, sqlite.DBStatusCacheMiss} {
				cur, _, err := st.Status(op, reset)
				if err != nil {
					return err
				}
				n += cur
			}
			return nil
		}))
		return n
	}
	// The schema is read by the first statement; it is not q's cost.
	var tables int
	require.NoError(tb, conn.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema`).Scan(&tables))
	counters(true)
	rows, err := conn.QueryContext(ctx, q, args...)
	require.NoError(tb, err, "%s", q)
	for rows.Next() {
	}
	require.NoError(tb, rows.Err(), "%s", q)
	require.NoError(tb, rows.Close())
	return counters(false)
}
