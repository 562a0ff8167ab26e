package journal

import (
	"context"
	"fmt"

	"github.com/wsstore/wsstore/index"
)

// EachRunEvents calls fn, in tx, with every run id the journal holds
// events of and how many it holds, ordered by run id. Fsck checks that each
// such run exists; the journal does not know runs. The error is fn's or a
// failed read.
func (j *Journal) EachRunEvents(ctx context.Context, tx *index.Tx, fn func(runID string, events int64) error) error {
	rows, err := tx.QueryxContext(ctx, `SELECT run_id, count(*) FROM events GROUP BY run_id ORDER BY run_id`)
	if err != nil {
		return fmt.Errorf("read event counts: %w", index.Translate(err))
	}
	defer rows.Close()
	for rows.Next() {
		var runID string
		var n int64
		if err := rows.Scan(&runID, &n); err != nil {
			return fmt.Errorf("read event counts: %w", index.Translate(err))
		}
		if err := fn(runID, n); err != nil {
			return err
		}
	}
	return index.Translate(rows.Err())
}
