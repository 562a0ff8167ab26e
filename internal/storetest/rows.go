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
