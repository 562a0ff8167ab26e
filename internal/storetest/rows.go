package storetest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/index"
)

// CountRows returns the number of rows in table, read from the last
// committed state. table is a name from the test's own code, never input.
func CountRows(tb testing.TB, db *index.DB, table string) int {
	tb.Helper()
	var n int
	require.NoError(tb, db.View(context.Background(), func(tx *index.Tx) error {
		return tx.GetContext(context.Background(), &n, `SELECT count(*) FROM `+table)
	}), "count rows of %s", table)
	return n
}

// QueryPlan returns the detail column of SQLite's EXPLAIN QUERY PLAN for
// q run with args, one line per step, read from the last committed state.
func QueryPlan(tb testing.TB, db *index.DB, q string, args ...any) []string {
	tb.Helper()
	var plan []string
	ctx := context.Background()
	require.NoError(tb, db.View(ctx, func(tx *index.Tx) error {
		rows, err := tx.QueryxContext(ctx, "EXPLAIN QUERY PLAN "+q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				return err
			}
			plan = append(plan, detail)
		}
		return rows.Err()
	}), "explain %s", q)
	return plan
}
