package checkpoint

import (
	"context"
	"fmt"
	"slices"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/wserr"
)

// Pinned lists, in tx, the checkpoints of a run that a cap must not
// delete because something else refers to them (a commit assembled from
// one). Prune calls it only when the run is over its cap, so a run under
// its cap pays nothing for it. Seqs it names that do not exist are
// ignored.
type Pinned func(ctx context.Context, tx *index.Tx, runID string) ([]int64, error)

// The queries of Prune go through the primary key (run_id, seq) or the
// index on (run_id, parent_seq): the count and the read of the run's rows
// visit only that run's rows, which the cap keeps at its size (plus pins
// and the one just created), each delete touches one row, and each relink
// the deleted row's children. A test holds them to that with EXPLAIN
// QUERY PLAN.
const (
	countSQL  = `SELECT count(*) FROM checkpoints WHERE run_id = ?`
	rowsSQL   = `SELECT seq, parent_seq FROM checkpoints WHERE run_id = ? ORDER BY seq`
	deleteSQL = `DELETE FROM checkpoints WHERE run_id = ? AND seq = ? RETURNING root`
	relinkSQL = `UPDATE checkpoints INDEXED BY checkpoints_parent SET parent_seq = ? WHERE run_id = ? AND parent_seq = ?`
)

// Prune deletes the run's oldest checkpoints, in tx, until it holds at
// most limit (0 or less: no cap, nothing is done); the caller records the
// deletion (runs: one checkpoints_pruned event and a deletion-log entry).
// Checkpoints off the line that leads to keep (the one just
// created: its parent, the parent's parent, …) go first, oldest first,
// then the oldest on that line: after a rollback, the abandoned branch
// goes before the checkpoint the run went back to. The children of a
// deleted checkpoint take its parent as theirs, so the line runs on past
// it. It never deletes keep nor one that pinned names: when those alone
// are more than limit, the run stays above its cap rather than lose one.
// It returns the seqs deleted, oldest first; nil when nothing was over the
// cap.
//
// Only rows go: the checkpoint_created events of the deleted checkpoints
// stay in the journal, which is append-only, and their trees become
// garbage for gc unless something else still reaches them. Reading,
// diffing or rolling back to a deleted checkpoint then fails with
// checkpoint.not_found, as for any checkpoint that never existed. It reads
// the run's rows, which the cap keeps at limit plus pins plus one, so the
// cost grows with the cap, not with how many checkpoints the run has ever
// taken.
//
// It fails with workspace.invalid_argument for a negative limit, or with
// the errors of pinned.
func (s *Store) Prune(ctx context.Context, tx *index.Tx, runID string, limit int, keep int64, pinned Pinned) ([]int64, error) {
	if limit < 0 {
		return nil, wserr.New(wserr.InvalidArgument, "prune checkpoints", "", "the cap %d is negative", limit)
	}
	if limit == 0 {
		return nil, nil
	}
	var n int64
	if err := tx.GetContext(ctx, &n, countSQL, runID); err != nil {
		return nil, fmt.Errorf("prune checkpoints: %w", index.Translate(err))
	}
	excess := n - int64(limit)
	if excess <= 0 {
		return nil, nil
	}
	skip := map[int64]bool{keep: true}
	if pinned != nil {
		pins, err := pinned(ctx, tx, runID)
		if err != nil {
			return nil, fmt.Errorf("prune checkpoints: %w", err)
		}
		for _, p := range pins {
			skip[p] = true
		}
	}
	var rows []struct {
		Seq    int64 `db:"seq"`
		Parent int64 `db:"parent_seq"`
	}
	if err := tx.SelectContext(ctx, &rows, rowsSQL, runID); err != nil {
		return nil, fmt.Errorf("prune checkpoints: %w", index.Translate(err))
	}
	parent := make(map[int64]int64, len(rows))
	for _, r := range rows {
		parent[r.Seq] = r.Parent
	}
	line := map[int64]bool{} // keep and its ancestors that still exist
	for seq := keep; !line[seq]; seq = parent[seq] {
		if _, ok := parent[seq]; !ok {
			break // pruned before, or 0: the line ends
		}
		line[seq] = true
	}
	var off, on []int64 // candidates off and on keep's line, oldest first
	for _, r := range rows {
		switch {
		case skip[r.Seq]:
		case line[r.Seq]:
			on = append(on, r.Seq)
		default:
			off = append(off, r.Seq)
		}
	}
	pruned := slices.Concat(off, on)
	pruned = pruned[:min(int64(len(pruned)), excess)]
	if len(pruned) == 0 {
		return nil, nil
	}
	slices.Sort(pruned)
	for _, seq := range pruned {
		if err := s.deleteRow(ctx, tx, runID, seq); err != nil {
			return nil, fmt.Errorf("prune checkpoints: %w", err)
		}
		// Oldest first, so a parent pruned earlier has already handed
		// its own parent down to this one.
		if _, err := tx.ExecContext(ctx, relinkSQL, parent[seq], runID, seq); err != nil {
			return nil, fmt.Errorf("prune checkpoints: %w", index.Translate(err))
		}
		for c, p := range parent {
			if p == seq {
				parent[c] = parent[seq]
			}
		}
	}
	return pruned, nil
}

// deleteRow deletes checkpoint seq of the run, in tx, and records its root
// as a candidate for the next collection.
func (s *Store) deleteRow(ctx context.Context, tx *index.Tx, runID string, seq int64) error {
	var root cas.Hash
	if err := tx.QueryRowContext(ctx, deleteSQL, runID, seq).Scan(&root); err != nil {
		return index.Translate(err)
	}
	return s.trees.Orphaned(ctx, tx, root)
}
