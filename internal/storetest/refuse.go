package storetest

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/index"
)

// RefuseDeletesAfter lets n rows be deleted from tables, counted together
// across transactions (a transaction that fails does not count its own),
// and then fails every further delete from them, and so the transaction
// of that delete: a failure injected after the first pages of a
// collection or a prune, for any process that opens the store. The
// refusal is SQLite's own error (a trigger's), without a code. It is
// lifted when the test ends. tables come from the test's own code, never
// input.
func RefuseDeletesAfter(tb testing.TB, db *index.DB, n int, tables ...string) {
	tb.Helper()
	ctx := context.Background()
	stmts := []string{
		`CREATE TABLE test_refuse_deletes (deleted INTEGER NOT NULL, allowed INTEGER NOT NULL)`,
		fmt.Sprintf(`INSERT INTO test_refuse_deletes VALUES (0, %d)`, n),
	}
	var drops []string
	for _, t := range tables {
		stmts = append(stmts,
			fmt.Sprintf(`CREATE TRIGGER test_refuse_%[1]s BEFORE DELETE ON %[1]s
				WHEN (SELECT deleted >= allowed FROM test_refuse_deletes)
				BEGIN SELECT RAISE(ABORT, 'the test refuses this delete'); END`, t),
			fmt.Sprintf(`CREATE TRIGGER test_count_%[1]s AFTER DELETE ON %[1]s
				BEGIN UPDATE test_refuse_deletes SET deleted = deleted + 1; END`, t))
		drops = append(drops, `DROP TRIGGER test_refuse_`+t, `DROP TRIGGER test_count_`+t)
	}
	drops = append(drops, `DROP TABLE test_refuse_deletes`)
	exec := func(stmts []string) error {
		return db.Update(ctx, func(tx *index.Tx) error {
			for _, q := range stmts {
				if _, err := tx.ExecContext(ctx, q); err != nil {
					return fmt.Errorf("%s: %w", q, err)
				}
			}
			return nil
		})
	}
	require.NoError(tb, exec(stmts))
	tb.Cleanup(func() { require.NoError(tb, exec(drops)) })
}
