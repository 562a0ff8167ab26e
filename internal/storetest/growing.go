package storetest

import (
	"context"
	"sync/atomic"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
)

// GrowingStorage is the SQLite storage with re-encodings that take room:
// while Grow is set, each Reencode also writes 64 KiB into the table
// padding (CreatePadding makes it), as page churn or a larger form may
// when a store nears its cap.
type GrowingStorage struct {
	*cas.SQLiteStorage
	Grow atomic.Bool
}

// NewGrowingStorage returns a GrowingStorage that does not grow yet.
func NewGrowingStorage() *GrowingStorage {
	return &GrowingStorage{SQLiteStorage: cas.NewSQLiteStorage()}
}

// CreatePadding makes the table the growth goes to.
func CreatePadding(ctx context.Context, db *index.DB) error {
	return db.Update(ctx, func(tx *index.Tx) error {
		_, err := tx.ExecContext(ctx, `CREATE TABLE padding (b BLOB)`)
		return err
	})
}

// Reencode is the SQLite storage's, after 64 KiB of padding while Grow is
// set.
func (g *GrowingStorage) Reencode(ctx context.Context, tx *index.Tx, h cas.Hash, codec cas.Codec, base cas.Hash, data []byte) error {
	if g.Grow.Load() {
		if _, err := tx.ExecContext(ctx, `INSERT INTO padding VALUES (randomblob(65536))`); err != nil {
			return err
		}
	}
	return g.SQLiteStorage.Reencode(ctx, tx, h, codec, base, data)
}
