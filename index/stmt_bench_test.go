package index_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/wsstore/wsstore/index"
)

// BenchmarkStatements measures what a transaction and its statements cost
// on this stack apart from their work: ten point queries on a one-row
// table, in a read and in a write transaction, under a context that
// cannot end and under one that can (a host's request, a command that
// stops on a signal), which the driver would watch with a goroutine per
// statement and database/sql with one per transaction.
func BenchmarkStatements(b *testing.B) {
	for _, cancellable := range []bool{false, true} {
		ctx := context.Background()
		if cancellable {
			var cancel func()
			ctx, cancel = context.WithCancel(ctx)
			defer cancel()
		}
		db, err := index.Open(ctx, filepath.Join(b.TempDir(), "stmts.db"), index.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		if err := db.Exec(ctx, `CREATE TABLE t (k INTEGER PRIMARY KEY, v BLOB)`); err != nil {
			b.Fatal(err)
		}
		if err := db.Exec(ctx, `INSERT INTO t VALUES (1, x'0102')`); err != nil {
			b.Fatal(err)
		}
		queries := func(tx *index.Tx) error {
			var v []byte
			for range 10 {
				if err := tx.GetContext(ctx, &v, `SELECT v FROM t WHERE k = ?`, 1); err != nil {
					return err
				}
			}
			return nil
		}
		b.Run(fmt.Sprintf("cancellable=%v/read", cancellable), func(b *testing.B) {
			for b.Loop() {
				if err := db.View(ctx, queries); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("cancellable=%v/write", cancellable), func(b *testing.B) {
			for b.Loop() {
				if err := db.Update(ctx, queries); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
