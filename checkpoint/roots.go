package checkpoint

import (
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
)

// EachRunCount calls fn, in tx, with every run that has checkpoints and
// how many, ordered by run id, runs that are gone too. It reads every row
// of the table itself, not an index of it (count(root)), holding nothing
// across runs: a row a damaged page lets through whose values do not scan
// fails it with store.corrupt, as any full read would. The error is fn's
// or a failed read.
func (s *Store) EachRunCount(ctx context.Context, tx *index.Tx, fn func(runID string, n int64) error) error {
	rows, err := tx.QueryxContext(ctx, `SELECT run_id, count(root) FROM checkpoints GROUP BY run_id ORDER BY run_id`)
	if err != nil {
		return fmt.Errorf("count checkpoints: %w", index.Translate(err))
	}
	return eachRow(rows, func(rows *sqlx.Rows) error {
		var runID string
		var n int64
		if err := rows.Scan(&runID, &n); err != nil {
			return index.TranslateRow("read", "a checkpoint's run", err) // a value of the wrong type: damage
		}
		return fn(runID, n)
	})
}

// EachRootOf calls fn, in tx, with the seq and root tree of every
// checkpoint of run runID, whether or not the run is still there, ordered
// by seq: roots gc keeps and fsck checks. The rows are read as fn takes
// them, so nothing is held across them; fn may read through tx. The error
// is fn's or a failed read.
func (s *Store) EachRootOf(ctx context.Context, tx *index.Tx, runID string, fn func(seq int64, root cas.Hash) error) error {
	rows, err := tx.QueryxContext(ctx, `SELECT seq, root FROM checkpoints WHERE run_id = ? ORDER BY seq`, runID)
	if err != nil {
		return fmt.Errorf("read checkpoint roots: %w", index.Translate(err))
	}
	return eachRow(rows, func(rows *sqlx.Rows) error {
		var seq int64
		var root cas.Hash
		if err := rows.Scan(&seq, &root); err != nil {
			return index.TranslateRow("read", "a checkpoint root", err) // a value of the wrong type: damage
		}
		return fn(seq, root)
	})
}

func eachRow(rows *sqlx.Rows, fn func(rows *sqlx.Rows) error) error {
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return err
		}
	}
	return index.Translate(rows.Err())
}

// HoldsTree reports whether a checkpoint's root is tree h, through the
// index on the root column.
func (s *Store) HoldsTree(ctx context.Context, tx *index.Tx, h cas.Hash) (bool, error) {
	var ok bool
	if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM checkpoints WHERE root = ?)`, h).Scan(&ok); err != nil {
		return false, fmt.Errorf("checkpoint roots: %w", index.Translate(err))
	}
	return ok, nil
}

// Has reports, in tx, whether run runID holds checkpoint seq.
func (s *Store) Has(ctx context.Context, tx *index.Tx, runID string, seq int64) (bool, error) {
	var n int
	if err := tx.GetContext(ctx, &n, `SELECT count(*) FROM checkpoints WHERE run_id = ? AND seq = ?`, runID, seq); err != nil {
		return false, fmt.Errorf("find checkpoint: %w", index.Translate(err))
	}
	return n > 0, nil
}

// EachDanglingParent calls fn, in tx, for each checkpoint whose parent
// (not 0: none) is no checkpoint of its run. It reads the table once,
// looking each parent up by key.
func (s *Store) EachDanglingParent(ctx context.Context, tx *index.Tx, fn func(runID string, seq, parent int64) error) error {
	rows, err := tx.QueryxContext(ctx, `SELECT k.run_id, k.seq, k.parent_seq FROM checkpoints k WHERE k.parent_seq <> 0
		AND NOT EXISTS (SELECT 1 FROM checkpoints c WHERE c.run_id = k.run_id AND c.seq = k.parent_seq) ORDER BY k.run_id, k.seq`)
	if err != nil {
		return fmt.Errorf("read checkpoint parents: %w", index.Translate(err))
	}
	return eachRow(rows, func(rows *sqlx.Rows) error {
		var runID string
		var seq, parent int64
		if err := rows.Scan(&runID, &seq, &parent); err != nil {
			return fmt.Errorf("read checkpoint parents: %w", index.Translate(err))
		}
		return fn(runID, seq, parent)
	})
}
