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
// events stay as they were; what each checkpoint made dead (Retained) is
// measured again between the new roots, so what left every root no longer
// counts against the byte cap, and the old roots are recorded as
// candidates for the next collection. fn is called once per distinct
// root; its error is returned and the transaction should then roll back.
func (s *Store) RewriteRoots(ctx context.Context, tx *index.Tx, runID string, fn func(root cas.Hash) (cas.Hash, error)) (int64, error) {
	var rows []struct {
		Seq  int64    `db:"seq"`
		Root cas.Hash `db:"root"`
		Dead int64    `db:"dead_bytes"`
		Cum  int64    `db:"cum_dead"`
	}
	if err := tx.SelectContext(ctx, &rows, `SELECT seq, root, dead_bytes, cum_dead FROM checkpoints WHERE run_id = ? ORDER BY seq`, runID); err != nil {
		return 0, fmt.Errorf("rewrite checkpoints: %w", index.Translate(err))
	}
	done := make(map[cas.Hash]cas.Hash, len(rows))
	var n int64
	var old []cas.Hash
	var prev cas.Hash
	var cum int64
	for i, r := range rows {
		next, ok := done[r.Root]
		if !ok {
			var err error
			if next, err = fn(r.Root); err != nil {
				return n, err
			}
			done[r.Root] = next
		}
		dead := r.Dead
		if i == 0 {
			cum = r.Cum
		} else {
			var err error
			if dead, err = s.deadBytes(ctx, tx, prev, next, nil); err != nil {
				return n, fmt.Errorf("rewrite checkpoints: %w", err)
			}
			cum += dead
		}
		prev = next
		if next == r.Root && dead == r.Dead && cum == r.Cum {
			continue
		}
		if _, err := tx.ExecContext(ctx, `UPDATE checkpoints SET root = ?, dead_bytes = ?, cum_dead = ? WHERE run_id = ? AND seq = ?`,
			next, dead, cum, runID, r.Seq); err != nil {
			return n, fmt.Errorf("rewrite checkpoints: %w", index.Translate(err))
		}
		if next != r.Root {
			n++
			old = append(old, r.Root)
		}
	}
	if err := s.trees.Orphaned(ctx, tx, dedup(old)...); err != nil {
		return n, fmt.Errorf("rewrite checkpoints: %w", err)
	}
	return n, nil
}
