package checkpoint

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
)

// The byte cap reads a run's oldest and newest checkpoint and deletes one
// row at a time through the primary key (run_id, seq), handing the
// deleted row's parent to its children through the index on (run_id,
// parent_seq): its cost is the checkpoints it deletes, not how many the
// run holds. A test holds them to that with EXPLAIN QUERY PLAN.
const (
	newestSQL = `SELECT seq, cum_dead, parent_seq FROM checkpoints WHERE run_id = ? ORDER BY seq DESC LIMIT 1`
	oldestSQL = `SELECT seq, cum_dead, parent_seq FROM checkpoints WHERE run_id = ? ORDER BY seq LIMIT 1`
	nextSQL   = `SELECT seq, cum_dead, parent_seq FROM checkpoints WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT 1`
	lastSQL   = `SELECT seq, cum_dead, root FROM checkpoints WHERE run_id = ? ORDER BY seq DESC LIMIT 1`
)

// deadBytes returns the stored bytes of the file versions that prev, the
// root of the run's newest checkpoint before this one, holds and root
// does not (the old side of every change from one to the other, unless
// the same content is still in root; of a version stored in chunks, the
// chunks the path's new version does not list). The step is taken from the newest
// checkpoint by seq, not from the parent: after a rollback, the versions
// the abandoned branch wrote are in the newest checkpoint and not in the
// new one, and they count here; diffing against the parent would never
// count them, and a run that rolls back again and again would keep ever
// more than its cap. A zero prev (the run's first checkpoint) counts
// nothing. A version's size in known is taken as it is.
//
// The sum of these over the run (Retained) is what the byte cap holds. It
// never counts less than pruning every checkpoint but the newest would
// give back of file contents, and counts more in exactly these cases: a
// version that leaves the workspace and comes back (a rollback, or a file
// restored to an earlier content) counts each time it leaves; a version
// another root also reaches (another run or chat, a commit, a persist
// layer, a pinned checkpoint: content is stored once) counts though
// pruning frees nothing of it, and so does a chunk that a version at
// another path also lists. Tree rows are not counted.
// Erring high means the cap prunes early, never that a run keeps more
// than its cap of file content.
func (s *Store) deadBytes(ctx context.Context, tx *index.Tx, prev, root cas.Hash, known []cas.Sized) (int64, error) {
	if prev.IsZero() || prev == root {
		return 0, nil
	}
	changes, err := s.trees.Diff(ctx, tx, prev, root)
	if err != nil {
		return 0, err
	}
	live := map[cas.Hash]bool{}
	for _, c := range changes {
		if !c.New.Hash.IsZero() {
			live[c.New.Hash] = true
		}
	}
	var dead int64
	seen := map[cas.Hash]bool{}
	for _, c := range changes {
		h := c.Old.Hash
		if h.IsZero() || live[h] || seen[h] {
			continue
		}
		seen[h] = true
		if i := slices.IndexFunc(known, func(k cas.Sized) bool { return k.Hash == h }); i >= 0 {
			dead += known[i].Bytes
			continue
		}
		// A large file's next version shares the chunks the edit did not
		// reach: only the others go with this one.
		n, err := s.blobs.StoredBytesApart(ctx, tx, h, c.New.Hash)
		switch {
		case err == nil:
			dead += n
		case errors.Is(err, cas.ErrNotFound):
			// Gone already (a rollback made the version garbage and gc
			// took it): nothing left to give back.
		default:
			return 0, err
		}
	}
	return dead, nil
}

// Retained returns the bytes the run's checkpoints keep beyond its newest
// one: the file versions later checkpoints replaced or removed, counted as
// stored (a version kept as a small delta counts small), which is what
// pruning every checkpoint but the newest would give back. It reads two
// rows, whatever the run's history. Runs whose rows predate the measure
// count 0 for them.
func (s *Store) Retained(ctx context.Context, tx *index.Tx, runID string) (int64, error) {
	var out int64
	err := s.view(ctx, tx, func(tx *index.Tx) error {
		var err error
		out, err = retained(ctx, tx, runID)
		return err
	})
	return out, err
}

type edge struct {
	Seq    int64 `db:"seq"`
	Cum    int64 `db:"cum_dead"`
	Parent int64 `db:"parent_seq"`
}

func ends(ctx context.Context, tx *index.Tx, runID string) (oldest, newest edge, ok bool, err error) {
	if err = tx.GetContext(ctx, &oldest, oldestSQL, runID); errors.Is(err, sql.ErrNoRows) {
		return oldest, newest, false, nil
	}
	if err != nil {
		return oldest, newest, false, index.Translate(err)
	}
	if err = tx.GetContext(ctx, &newest, newestSQL, runID); err != nil {
		return oldest, newest, false, index.Translate(err)
	}
	return oldest, newest, true, nil
}

func retained(ctx context.Context, tx *index.Tx, runID string) (int64, error) {
	o, n, ok, err := ends(ctx, tx, runID)
	if err != nil || !ok {
		return 0, err
	}
	return max(n.Cum-o.Cum, 0), nil
}

// PruneBytes deletes the run's oldest checkpoints, in tx, while what they
// keep beyond the newest (Retained) is more than maxBytes (0 or less: no
// cap); the caller records the deletion, as for Prune. It passes over a checkpoint pinned names (a commit refers to it), which
// stays, and what a pin keeps beyond the checkpoints after it is the
// pin's, not counted against the cap: the cap then holds the checkpoints
// from the oldest unpinned one on, so a run that commits early stays
// within it (if pins alone keep more, the run stays above the cap rather
// than lose one). It stops at keep (the checkpoint just created). Each
// deletion costs a few row reads through the primary key, and a read per
// pin it passes, so a checkpoint pays for what it prunes, not for the
// run's history. The children of a deleted checkpoint take its parent as
// theirs, as with Prune.
//
// It returns the seqs deleted, oldest first, and the bytes their deletion
// gives back by the measure of Retained; nil and 0 when the run is within
// the cap. It fails with the errors of pinned.
func (s *Store) PruneBytes(ctx context.Context, tx *index.Tx, runID string, maxBytes int64, keep int64, pinned Pinned) ([]int64, int64, error) {
	if maxBytes <= 0 {
		return nil, 0, nil
	}
	var pruned []int64
	var freed int64
	var pins map[int64]bool
	for {
		o, n, ok, err := ends(ctx, tx, runID)
		if err != nil {
			return nil, 0, fmt.Errorf("prune checkpoints: %w", err)
		}
		if !ok || n.Cum-o.Cum <= maxBytes || o.Seq == keep || o.Seq == n.Seq {
			break
		}
		if pins == nil {
			pins = map[int64]bool{}
			if pinned != nil {
				ps, err := pinned(ctx, tx, runID)
				if err != nil {
					return nil, 0, fmt.Errorf("prune checkpoints: %w", err)
				}
				for _, p := range ps {
					pins[p] = true
				}
			}
		}
		// The oldest checkpoint the cap may delete: past the pins.
		for pins[o.Seq] && o.Seq != n.Seq {
			if err := tx.GetContext(ctx, &o, nextSQL, runID, o.Seq); err != nil {
				return nil, 0, fmt.Errorf("prune checkpoints: %w", index.Translate(err))
			}
		}
		if n.Cum-o.Cum <= maxBytes || o.Seq == keep || o.Seq == n.Seq {
			break
		}
		var next edge
		if err := tx.GetContext(ctx, &next, nextSQL, runID, o.Seq); err != nil {
			return nil, 0, fmt.Errorf("prune checkpoints: %w", index.Translate(err))
		}
		if err := s.deleteRow(ctx, tx, runID, o.Seq); err != nil {
			return nil, 0, fmt.Errorf("prune checkpoints: %w", err)
		}
		if _, err := tx.ExecContext(ctx, relinkSQL, o.Parent, runID, o.Seq); err != nil {
			return nil, 0, fmt.Errorf("prune checkpoints: %w", index.Translate(err))
		}
		pruned = append(pruned, o.Seq)
		freed += next.Cum - o.Cum
	}
	if len(pruned) == 0 {
		return nil, 0, nil
	}
	return pruned, freed, nil
}
