package remote

import (
	"context"
	"fmt"
	"strings"
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

// goneBatch is how many gone packs unpushGone deals with in one round
// of statements.
const goneBatch = 256

// unpushGone marks unpushed the objects the store holds of the packs it
// recorded that are gone from the object store, and counts those it does
// not hold. It lists data/ once; the recorded packs wait in a scratch
// database meanwhile, not in memory. The recorded packs are read a page
// at a time, each by a seek in remote_objects_pack, and the gone packs
// dealt with goneBatch at a time, so what it costs grows with the packs,
// not with the objects the store records.
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
		// '' (a chunked blob's list) and NULL (not pushed) are not > ''.
		after := ""
		for {
			var page []string
			if err := tx.SelectContext(ctx, &page, `WITH RECURSIVE p(pack, n) AS (
					SELECT (SELECT min(pack) FROM remote_objects WHERE pack > ?), 1
					UNION ALL
					SELECT (SELECT min(pack) FROM remote_objects WHERE pack > p.pack), n + 1 FROM p WHERE p.pack IS NOT NULL AND n < ?)
				SELECT pack FROM p WHERE pack IS NOT NULL`, after, goneBatch); err != nil {
				return index.Translate(err)
			}
			for _, p := range page {
				if _, err := recorded.Add(ctx, []byte(p), 1); err != nil {
					return err
				}
			}
			if len(page) < goneBatch {
				return nil
			}
			after = page[len(page)-1]
		}
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
		var batch []any
		flush := func() error {
			if len(batch) == 0 {
				return nil
			}
			in := "?" + strings.Repeat(", ?", len(batch)-1)
			// A chunked blob's list is in an index object, gone with the
			// packs: it goes again after its chunks held here.
			res, err := tx.ExecContext(ctx, `UPDATE remote_objects SET pack = NULL WHERE kind = 0 AND pack = '' AND hash IN (
				SELECT c.blob FROM remote_objects o JOIN remote_chunks c ON c.chunk = o.hash
				WHERE o.kind = 1 AND o.pack IN (`+in+`)
				AND EXISTS (SELECT 1 FROM remote_cache k WHERE k.kind = o.kind AND k.hash = o.hash))`, batch...)
			if err != nil {
				return index.Translate(err)
			}
			n, _ := res.RowsAffected()
			repush += int(n)
			if res, err = tx.ExecContext(ctx, `UPDATE remote_objects SET pack = NULL, off = 0, sum = NULL WHERE pack IN (`+in+`)
				AND EXISTS (SELECT 1 FROM remote_cache c WHERE c.kind = remote_objects.kind AND c.hash = remote_objects.hash)`, batch...); err != nil {
				return index.Translate(err)
			}
			n, _ = res.RowsAffected()
			repush += int(n)
			var left int
			if err := tx.GetContext(ctx, &left, `SELECT count(*) FROM remote_objects WHERE pack IN (`+in+`)`, batch...); err != nil {
				return index.Translate(err)
			}
			lost += left
			// The records of objects held nowhere here name their pack as
			// gone (lostPack), so that a pull takes the record of another
			// device that pushes them again in their place (recordEntry).
			if _, err := tx.ExecContext(ctx, `UPDATE remote_objects SET pack = ? || pack WHERE pack IN (`+in+`) AND pack NOT GLOB ?`,
				append(append([]any{lostPack}, batch...), lostPack+"*")...); err != nil {
				return index.Translate(err)
			}
			batch = batch[:0]
			return nil
		}
		err := recorded.Each(ctx, func(k []byte, v int64) error {
			if v == 0 {
				return nil
			}
			if batch = append(batch, string(k)); len(batch) == goneBatch {
				return flush()
			}
			return nil
		})
		if err != nil {
			return err
		}
		return flush()
	})
	return repush, lost, err
}
