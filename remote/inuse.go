package remote

import (
	"context"

	"github.com/wsstore/wsstore/index"
)

// InUse reports whether the store at db keeps objects on a remote tier:
// such a store must be opened with the tier's URL, or its contents would
// look missing and new ones would land beside them in SQLite.
func InUse(ctx context.Context, db *index.DB) (bool, error) {
	var n int
	err := db.View(ctx, func(tx *index.Tx) error {
		return tx.GetContext(ctx, &n, `SELECT count(*) FROM (SELECT 1 FROM remote_objects LIMIT 1)`)
	})
	if err != nil {
		return false, index.Translate(err)
	}
	return n > 0, nil
}
