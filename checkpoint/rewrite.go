package checkpoint

import (
	"context"
	"fmt"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
)

// RewriteRoots replaces, in tx, the root of each of the run's checkpoints
// with what fn makes of it, and returns how many rows changed. It exists
// for one purpose: an ended run's collected scratch/ must leave its
// checkpoints too, or their roots would keep the scratch trees (and
// their blobs) reachable for gc forever. Ids, seqs, parents, reasons and
// events stay as they were. fn is called once per distinct root; its
// error is returned and the transaction should then roll back.
func (s *Store) RewriteRoots(ctx context.Context, tx *index.Tx, runID string, fn func(root cas.Hash) (cas.Hash, error)) (int64, error) {
	var rows []row
	if err := tx.SelectContext(ctx, &rows, `SELECT `+cols+` FROM checkpoints WHERE run_id = ? ORDER BY seq`, runID); err != nil {
		return 0, fmt.Errorf("rewrite checkpoints: %w", index.Translate(err))
	}
	done := make(map[cas.Hash]cas.Hash, len(rows))
	var n int64
	for _, r := range rows {
		next, ok := done[r.Root]
		if !ok {
			var err error
			if next, err = fn(r.Root); err != nil {
				return n, err
			}
			done[r.Root] = next
		}
		if next == r.Root {
			continue
		}
		if _, err := tx.ExecContext(ctx, `UPDATE checkpoints SET root = ? WHERE run_id = ? AND seq = ?`, next, runID, r.Seq); err != nil {
			return n, fmt.Errorf("rewrite checkpoints: %w", index.Translate(err))
		}
		n++
	}
	return n, nil
}
