package remote

import (
	"context"
	"fmt"
	"time"

	"github.com/wsstore/wsstore/index"
)

// Repair says what CheckPublished found gone from the object store and
// what it did about it.
type Repair struct {
	// Gone names the store's own keys found missing: its devices/ entry
	// (written again) and its last segment (its next segment is a base).
	Gone []string `json:"gone,omitempty"`
	// Repush counts the objects, in packs gone from the object store,
	// that the store holds and pushes again; Lost those it does not hold,
	// which no device can read any more.
	Repush int `json:"repush,omitempty"`
	Lost   int `json:"lost,omitempty"`
}

// CheckPublished checks, at the cost of two HEAD requests, that what the
// store published under device is still on the object store: its entry
// under devices/, written again when gone, and its last segment. When
// that segment is gone (deleted, or the bucket emptied or recreated), the
// store's next segment is made a base (Rebase), which stands for every
// segment before it, and the packs the store recorded as pushed are
// checked, one listing of data/: the objects of those gone that the store
// holds are marked unpushed, so the next push uploads them again. It fails
// as the object store's requests do (store.busy, store.invalid_options).
func (s *Storage) CheckPublished(ctx context.Context, db *index.DB, device string) (Repair, error) {
	var r Repair
	ok, err := s.b.present(ctx, devicesDir+device)
	if err != nil {
		return r, fmt.Errorf("check published: %w", err)
	}
	if !ok {
		r.Gone = append(r.Gone, devicesDir+device)
		if err := s.RegisterDevice(ctx, device); err != nil {
			return r, err
		}
	}
	last, err := LastSegment(ctx, db)
	if err != nil || last == "" {
		return r, err
	}
	if ok, err = s.b.present(ctx, last); err != nil || ok {
		if err != nil {
			err = fmt.Errorf("check published: %w", err)
		}
		return r, err
	}
	r.Gone = append(r.Gone, last)
	if err := db.Update(ctx, func(tx *index.Tx) error { return index.SetSetting(ctx, tx, rebaseKey, last) }); err != nil {
		return r, err
	}
	r.Repush, r.Lost, err = s.unpushGone(ctx, db)
	return r, err
}

// unpushGone marks unpushed the objects the store holds of the packs it
// recorded that are gone from the object store, and counts those it does
// not hold. It lists data/ once; the recorded packs wait in a scratch
// database meanwhile, not in memory.
func (s *Storage) unpushGone(ctx context.Context, db *index.DB) (repush, lost int, err error) {
	sc, err := index.OpenScratch(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("check published: %w", err)
	}
	defer sc.Close()
	recorded, err := sc.NewMap(ctx) // pack → 1 while not listed
	if err != nil {
		return 0, 0, fmt.Errorf("check published: %w", err)
	}
	if err := db.View(ctx, func(tx *index.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT DISTINCT pack FROM remote_objects WHERE pack IS NOT NULL AND pack != ''`)
		if err != nil {
			return index.Translate(err)
		}
		defer rows.Close()
		for rows.Next() {
			var p []byte
			if err := rows.Scan(&p); err != nil {
				return index.Translate(err)
			}
			if _, err := recorded.Add(ctx, p, 1); err != nil {
				return err
			}
		}
		return index.Translate(rows.Err())
	}); err != nil {
		return 0, 0, err
	}
	gone, err := recorded.Len(ctx)
	if err != nil || gone == 0 {
		return 0, 0, err
	}
	if err := s.b.list(ctx, dataDir, "", func(key string, _ time.Time) error {
		if v, _, err := recorded.Get(ctx, []byte(key)); err != nil || v != 1 {
			return err
		}
		gone--
		return recorded.Set(ctx, []byte(key), 0)
	}); err != nil {
		return 0, 0, fmt.Errorf("check published: %w", err)
	}
	if gone == 0 {
		return 0, 0, nil
	}
	err = db.Update(ctx, func(tx *index.Tx) error {
		err := recorded.Each(ctx, func(k []byte, v int64) error {
			if v == 0 {
				return nil
			}
			p := string(k)
			res, err := tx.ExecContext(ctx, `UPDATE remote_objects SET pack = NULL, off = 0, sum = NULL WHERE pack = ?
				AND EXISTS (SELECT 1 FROM remote_cache c WHERE c.kind = remote_objects.kind AND c.hash = remote_objects.hash)`, p)
			if err != nil {
				return index.Translate(err)
			}
			n, _ := res.RowsAffected()
			repush += int(n)
			var left int
			if err := tx.GetContext(ctx, &left, `SELECT count(*) FROM remote_objects WHERE pack = ?`, p); err != nil {
				return index.Translate(err)
			}
			lost += left
			return nil
		})
		if err != nil {
			return err
		}
		// A chunked blob's list is in an index object, gone with the
		// packs: it goes again after its chunks.
		res, err := tx.ExecContext(ctx, `UPDATE remote_objects SET pack = NULL WHERE kind = 0 AND pack = ''
			AND hash IN (SELECT c.blob FROM remote_chunks c JOIN remote_objects o ON o.kind = 1 AND o.hash = c.chunk WHERE o.pack IS NULL)`)
		if err != nil {
			return index.Translate(err)
		}
		n, _ := res.RowsAffected()
		repush += int(n)
		return nil
	})
	return repush, lost, err
}
