package runs

import (
	"context"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
)

// moveHead makes root the run's live workspace and checkpoint head the
// one that heads it, in one update of the run's row. Every move of a
// run's head goes through here: a workspace change (write, patch, remove,
// apply), a rollback and every checkpoint. touch stamps the row's
// updated_at, as a change or rollback of the live tree does; a checkpoint
// of the tree as it stands leaves it alone.
func (s *Service) moveHead(ctx context.Context, tx *index.Tx, runID string, root cas.Hash, head int64, touch bool) error {
	var at any // nil keeps updated_at as it is
	if touch {
		at = s.now().UnixNano()
	}
	_, err := tx.ExecContext(ctx, `UPDATE runs SET root = ?, head_checkpoint = ?, updated_at = coalesce(?, updated_at) WHERE id = ?`,
		root, head, at, runID)
	return index.Translate(err)
}
