package index_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/wsstore/wsstore/index"
)

// BenchmarkWriteFloor measures what a write transaction costs on this
// stack (modernc's SQLite through database/sql, WAL, the store's
// connection settings) before any of the store's own work: one
// transaction that inserts a row at a random key into each of n tables
// of 5,000 rows, as a write inserts into the content-addressed indexes it
// touches (blobs, trees, tree_refs, checkpoints, events and their
// indexes). Its figures bound from below what a write that touches n
// b-trees can cost.
func BenchmarkWriteFloor(b *testing.B) {
	for _, n := range []int{1, 4, 8, 12} {
		b.Run(fmt.Sprintf("btrees=%d", n), func(b *testing.B) {
			ctx := context.Background()
			db, err := index.Open(ctx, filepath.Join(b.TempDir(), "floor.db"), index.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			for t := range n {
				if err := db.Exec(ctx, fmt.Sprintf(`CREATE TABLE floor%d (k BLOB PRIMARY KEY, v BLOB) WITHOUT ROWID`, t)); err != nil {
					b.Fatal(err)
				}
			}
			r := rand.New(rand.NewPCG(1, 2))
			key := make([]byte, 32)
			val := make([]byte, 100)
			insert := func(rows int) {
				err := db.Update(ctx, func(tx *index.Tx) error {
					for range rows {
						for t := range n {
							for i := range key {
								key[i] = byte(r.Uint32())
							}
							if _, err := tx.ExecContext(ctx, fmt.Sprintf(`INSERT INTO floor%d (k, v) VALUES (?, ?)`, t), key, val); err != nil {
								return err
							}
						}
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			insert(5000)
			for b.Loop() {
				insert(1)
			}
		})
	}
}
