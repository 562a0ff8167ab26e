package remote

import (
	"context"
	"crypto/rand"
	"encoding/binary"

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
	// token names the claim in sync_changes.claimed: a sync settles only
	// the rows it claimed itself.
	token int64
}

// ClaimChanges registers the tier as one the store syncs with, from which
// moment the index marks every change of an item for it (the triggers of
// migrations 00027 and 00028), and claims the changes marked so far,
// under a token of its own: what the caller examines now. A change after
// the claim is marked again, so the next sync examines it whatever
// becomes of this one; RecordPublished (or SettleChanges, when there was
// nothing to publish) forgets the rows still claimed under the token, and
// a sync that fails before leaves them for the next. A sync running
// beside it takes over its claims, so neither forgets what the other
// examined and did not publish. It costs what changed, not what the store
// holds.
func (s *Storage) ClaimChanges(ctx context.Context, db *index.DB) (Changes, error) {
	var c Changes
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return Changes{}, err
	}
	// Nonzero: 0 marks a row no sync has claimed since it changed.
	c.token = int64(binary.BigEndian.Uint64(b[:])>>1) | 1
	err := db.Update(ctx, func(tx *index.Tx) error {
		key := s.remoteKey()
		if _, err := tx.ExecContext(ctx, `INSERT INTO sync_remotes (remote) VALUES (?) ON CONFLICT (remote) DO NOTHING`, key); err != nil {
			return index.Translate(err)
		}
		if err := tx.GetContext(ctx, &c.All, `SELECT full FROM sync_remotes WHERE remote = ?`, key); err != nil {
			return index.Translate(err)
		}
		// Every row is this sync's to examine, those another sync claimed
		// and has not settled (it may have died) too.
		if _, err := tx.ExecContext(ctx, `UPDATE sync_changes SET claimed = ? WHERE remote = ?`, c.token, key); err != nil {
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

// settleChanges deletes in tx the changes c still claims (one marked
// again since, or claimed by another sync since, is not) and, after a
// sync that examined every item, has the next examine only what changes.
// The zero Changes (a pull's segment, which carries no metadata) claims
// nothing and settles nothing.
func (s *Storage) settleChanges(ctx context.Context, tx *index.Tx, c Changes) error {
	if c.token == 0 {
		// Token 0 is the claim of no sync: settling it would forget
		// every change not yet sent.
		return nil
	}
	key := s.remoteKey()
	if _, err := tx.ExecContext(ctx, `DELETE FROM sync_changes WHERE remote = ? AND claimed = ?`, key, c.token); err != nil {
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
			ON CONFLICT (remote, name) DO UPDATE SET claimed = 0 WHERE claimed != 0`, s.remoteKey(), it.Name()); err != nil {
			return index.Translate(err)
		}
	}
	return nil
}
