package index

import (
	"context"
	"fmt"

	"github.com/wsstore/wsstore/wserr"
)

// Exec runs one statement on the write connection outside any transaction,
// for what SQLite refuses inside one (VACUUM) or what acts on the whole
// database (PRAGMA wal_checkpoint). It waits for a running Update, and
// for a background checkpoint, to finish, so it must not be called from
// inside an Update's function (it would wait for itself); rows the
// statement returns are discarded. It fails with
// store.read_only on a read-only DB and store.busy when another process
// holds the lock past the busy timeout.
func (db *DB) Exec(ctx context.Context, query string) error {
	if db.closed.Load() {
		return errClosed("exec")
	}
	if db.write == nil {
		return wserr.New(wserr.ReadOnly, "exec", "", "store opened read-only")
	}
	if db.ckpt != nil {
		db.ckpt.pass.Lock()
		defer db.ckpt.pass.Unlock()
	}
	err := db.whileBusy(ctx, func() error {
		_, err := db.write.ExecContext(ctx, query)
		return Translate(err)
	})
	if err != nil {
		return db.closedMeanwhile("exec", fmt.Errorf("exec: %w", err))
	}
	return nil
}
