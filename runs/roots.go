package runs

import (
	"context"
	"fmt"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
)

// EachRunRoot calls fn, in tx, with every run's id, chat, live root and
// persist base, ordered by run id: roots gc keeps and fsck checks. The
// error is fn's or a failed read.
func (s *Service) EachRunRoot(ctx context.Context, tx *index.Tx, fn func(runID, chatID string, root, persistBase cas.Hash) error) error {
	rows, err := tx.QueryxContext(ctx, `SELECT id, chat_id, root, persist_base FROM runs ORDER BY id`)
	if err != nil {
		return fmt.Errorf("read run roots: %w", index.Translate(err))
	}
	defer rows.Close()
	for rows.Next() {
		var id, chat string
		var root, base cas.Hash
		if err := rows.Scan(&id, &chat, &root, &base); err != nil {
			return fmt.Errorf("read run roots: %w", index.Translate(err))
		}
		if err := fn(id, chat, root, base); err != nil {
			return err
		}
	}
	return index.Translate(rows.Err())
}

// EachChatRoot calls fn, in tx, with every chat workspace's id and persist
// root, ordered by chat id. The error is fn's or a failed read.
func (s *Service) EachChatRoot(ctx context.Context, tx *index.Tx, fn func(chatID string, persistRoot cas.Hash) error) error {
	rows, err := tx.QueryxContext(ctx, `SELECT id, persist_root FROM chats ORDER BY id`)
	if err != nil {
		return fmt.Errorf("read chat roots: %w", index.Translate(err))
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var root cas.Hash
		if err := rows.Scan(&id, &root); err != nil {
			return fmt.Errorf("read chat roots: %w", index.Translate(err))
		}
		if err := fn(id, root); err != nil {
			return err
		}
	}
	return index.Translate(rows.Err())
}

// EachRecordsRoot calls fn, in tx, with the records tree of every run
// that has one (tool-args/, tool-results/, model-responses/), ordered by
// run id: roots gc keeps and fsck checks beside the live roots. The error
// is fn's or a failed read.
func (s *Service) EachRecordsRoot(ctx context.Context, tx *index.Tx, fn func(runID string, records cas.Hash) error) error {
	rows, err := tx.QueryxContext(ctx, `SELECT id, records FROM runs WHERE records IS NOT NULL ORDER BY id`)
	if err != nil {
		return fmt.Errorf("read records roots: %w", index.Translate(err))
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var root cas.Hash
		if err := rows.Scan(&id, &root); err != nil {
			return fmt.Errorf("read records roots: %w", index.Translate(err))
		}
		if err := fn(id, root); err != nil {
			return err
		}
	}
	return index.Translate(rows.Err())
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
