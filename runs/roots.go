package runs

import (
	"context"
	"fmt"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
)

// EachWorkspaceRoot calls fn, in tx, with the trees every chat workspace
// and every run hold on to, ordered by chat id, then run id: a chat's own
// row first (runID "", root its persist root, base and records zero),
// then each run of the chat (its live root, persist base and records
// tree, zero while it has none). A run whose chat row is missing still
// comes, in its chat's place. These are the roots gc keeps and fsck
// checks. The rows are read as fn takes them, from the indexes in that
// order, so nothing is held across them; fn may read through tx. The
// error is fn's or a failed read.
func (s *Service) EachWorkspaceRoot(ctx context.Context, tx *index.Tx, fn func(chatID, runID string, root, persistBase, records cas.Hash) error) error {
	rows, err := tx.QueryxContext(ctx, `SELECT id, '', persist_root, NULL, NULL FROM chats
		UNION ALL SELECT chat_id, id, root, persist_base, records FROM runs ORDER BY 1, 2`)
	if err != nil {
		return fmt.Errorf("read workspace roots: %w", index.Translate(err))
	}
	defer rows.Close()
	for rows.Next() {
		var chat, run string
		var root, base, records cas.Hash
		if err := rows.Scan(&chat, &run, &root, &base, &records); err != nil {
			return fmt.Errorf("read workspace roots: %w", index.Translate(err))
		}
		if err := fn(chat, run, root, base, records); err != nil {
			return err
		}
	}
	return index.Translate(rows.Err())
}

// HasRun reports, in tx, whether run runID exists: what fsck asks of the
// runs that checkpoints and events name, and gc and du of the runs of
// checkpoints, to find those whose run is gone.
func (s *Service) HasRun(ctx context.Context, tx *index.Tx, runID string) (bool, error) {
	var ok bool
	if err := tx.GetContext(ctx, &ok, `SELECT EXISTS (SELECT 1 FROM runs WHERE id = ?)`, runID); err != nil {
		return false, fmt.Errorf("find run: %w", index.Translate(err))
	}
	return ok, nil
}

// HoldsTree reports whether a run (its live root, persist base or records)
// or a chat (its persist root) holds tree h, through the indexes on those
// columns: what a collection after a deletion asks of each tree it doubts.
func (s *Service) HoldsTree(ctx context.Context, tx *index.Tx, h cas.Hash) (bool, error) {
	var ok bool
	err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM runs WHERE root = ?1)
		OR EXISTS (SELECT 1 FROM runs WHERE persist_base = ?1)
		OR EXISTS (SELECT 1 FROM runs WHERE records = ?1)
		OR EXISTS (SELECT 1 FROM chats WHERE persist_root = ?1)`, h).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("run roots: %w", index.Translate(err))
	}
	return ok, nil
}

// EachCheckpointRef calls fn, in tx, with every reference from a run or a
// commit to a checkpoint of its run: kind "run" (ref the run's id) for a
// run's head, kind "commit" (ref the commit's id) for the checkpoint a
// commit was assembled from; references to none (0) are left out. The
// error is fn's or a failed read.
func (s *Service) EachCheckpointRef(ctx context.Context, tx *index.Tx, fn func(kind, ref, runID string, seq int64) error) error {
	for _, q := range []struct{ kind, query string }{
		{"run", `SELECT id, id, head_checkpoint FROM runs WHERE head_checkpoint <> 0 ORDER BY id`},
		{"commit", `SELECT id, run_id, checkpoint_seq FROM commits WHERE checkpoint_seq <> 0 ORDER BY run_id, seq`},
	} {
		rows, err := tx.QueryxContext(ctx, q.query)
		if err != nil {
			return fmt.Errorf("read checkpoint references: %w", index.Translate(err))
		}
		err = func() error {
			defer rows.Close()
			for rows.Next() {
				var ref, runID string
				var seq int64
				if err := rows.Scan(&ref, &runID, &seq); err != nil {
					return fmt.Errorf("read checkpoint references: %w", index.Translate(err))
				}
				if err := fn(q.kind, ref, runID, seq); err != nil {
					return err
				}
			}
			return index.Translate(rows.Err())
		}()
		if err != nil {
			return err
		}
	}
	return nil
}
