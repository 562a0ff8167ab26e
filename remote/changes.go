package remote

import (
	"context"

	"github.com/wsstore/wsstore/index"
)

// Changes is what a sync examines: the chats, runs and actor spaces
// (by Item.Name) whose row or journal changed since its tier's last sync,
// or every item when All is set.
type Changes struct {
	Names []string
	// All is set on the tier's first sync, after ResetDevice, and on the
	// first sync of a tier synced before changes were marked: Names is
	// then nil and every item is examined.
	All bool
}

// ClaimChanges registers the tier as one the store syncs with, from which
// moment the index marks every change of an item for it (the triggers of
// migration 00027), and claims the changes marked so far: what the
// caller examines now. A change after the claim is marked again, so the
// next sync examines it whatever becomes of this one; RecordPublished (or
// SettleChanges, when there was nothing to publish) forgets the claimed
// ones, and a sync that fails before leaves them for the next. It costs
// what changed, not what the store holds.
func (s *Storage) ClaimChanges(ctx context.Context, db *index.DB) (Changes, error) {
	var c Changes
	err := db.Update(ctx, func(tx *index.Tx) error {
		key := s.remoteKey()
		if _, err := tx.ExecContext(ctx, `INSERT INTO sync_remotes (remote) VALUES (?) ON CONFLICT (remote) DO NOTHING`, key); err != nil {
			return index.Translate(err)
		}
		if err := tx.GetContext(ctx, &c.All, `SELECT full FROM sync_remotes WHERE remote = ?`, key); err != nil {
			return index.Translate(err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE sync_changes SET claimed = 1 WHERE remote = ? AND claimed = 0`, key); err != nil {
			return index.Translate(err)
		}
		if c.All {
			return nil
		}
		return index.Translate(tx.SelectContext(ctx, &c.Names, `SELECT name FROM sync_changes WHERE remote = ? ORDER BY name`, key))
	})
	return c, err
}

// SettleChanges forgets the changes c claimed, for a sync that examined
// them and found nothing to publish.
func (s *Storage) SettleChanges(ctx context.Context, db *index.DB, c Changes) error {
	return db.Update(ctx, func(tx *index.Tx) error { return s.settleChanges(ctx, tx, c) })
}

// settleChanges deletes in tx the changes still claimed (one marked again
// since its claim is not) and, after a sync that examined every item,
// has the next examine only what changes.
func (s *Storage) settleChanges(ctx context.Context, tx *index.Tx, c Changes) error {
	key := s.remoteKey()
	if _, err := tx.ExecContext(ctx, `DELETE FROM sync_changes WHERE remote = ? AND claimed = 1`, key); err != nil {
		return index.Translate(err)
	}
	if c.All {
		if _, err := tx.ExecContext(ctx, `UPDATE sync_remotes SET full = 0 WHERE remote = ?`, key); err != nil {
			return index.Translate(err)
		}
	}
	return nil
}

// markChanged marks items changed for the tier in tx: their recorded state
// need not be the store's (one kept here against another device's
// deletion is recorded so that it is sent again), so the next sync
// examines them.
func (s *Storage) markChanged(ctx context.Context, tx *index.Tx, items []Item) error {
	for _, it := range items {
		if _, err := tx.ExecContext(ctx, `INSERT INTO sync_changes (remote, name) VALUES (?, ?)
			ON CONFLICT (remote, name) DO UPDATE SET claimed = 0 WHERE claimed = 1`, s.remoteKey(), it.Name()); err != nil {
			return index.Translate(err)
		}
	}
	return nil
}
