package cas

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/bits"
	"slices"

	"github.com/klauspost/compress/zstd"

	"github.com/wsstore/wsstore/index"
)

// Delta storage keeps the newest version of a file whole and the older
// ones as zstd frames that use another version's bytes as a raw
// dictionary, so reading the newest version (what a live workspace reads)
// is a plain read and any version costs at most MaxChain delta
// applications.
//
// A file's history is cut into segments. Within a segment the deltas run
// backwards, as Fossil's do: when a new version arrives, the previous one
// (stored whole) is re-encoded against the new one, and the segment's
// versions chain forward to its newest, the segment's keyframe. A whole
// blob's depth column holds the longest chain that ends at it. When the
// chain would grow past its budget, the segment closes: its keyframe is
// re-encoded as a forward delta against the keyframe of the segment before
// (prevkey), and the new version starts the next segment. A keyframe i
// segments along costs i applications, so its segment may hold MaxChain-i
// versions; with the default 16 a history needs one whole blob per ~150
// versions rather than one per 17, and no version ever costs more than 16.
// When the budget runs out the keyframe stays whole and the count starts
// again.
//
// Every conversion checks the bound with the real cost of its base (by
// walking its chain) and refuses a base whose chain contains the blob being
// converted, so chains stay bounded and acyclic whatever the stored hints
// say. A blob's address never changes: it is BLAKE3 of the plain bytes
// whatever the codec, and every read verifies every step of the chain.

// PutVersion stores b, which replaces the content at prev (a path's
// previous version; the zero Hash for none), and returns b's address. b is
// stored whole; prev is re-encoded as a delta (against b, or against the
// previous segment's keyframe when its segment closes) when that saves at
// least a quarter of prev's stored bytes, both fit in Options.DeltaMax and
// no version's chain grows past Options.MaxChain. A failure to build a
// delta only leaves prev as it was; errors are those of PutBytes and of the
// index.
func (s *Store) PutVersion(ctx context.Context, tx *index.Tx, b []byte, prev Hash) (Hash, error) {
	h, err := s.PutBytes(ctx, tx, b)
	if err != nil || prev.IsZero() || prev == h || s.opts.DeltaMax < 0 || len(b) > s.opts.InlineMax {
		return h, err
	}
	err = s.update(ctx, tx, func(tx *index.Tx) error { return s.rebase(ctx, tx, prev, h, b) })
	if err != nil {
		return Hash{}, fmt.Errorf("put %s: delta of %s: %w", h.Short(), prev.Short(), err)
	}
	return h, nil
}

type versionRow struct {
	Size    int64  `db:"size"`
	Stored  int64  `db:"stored"`
	Codec   int    `db:"codec"`
	Depth   int    `db:"depth"`
	Prevkey Hash   `db:"prevkey"`
	Data    []byte `db:"data"`
}

// maxChainLimit is the largest MaxChain a store accepts. Reads guard
// against cycles with it rather than with the MaxChain of the current
// open, since the store may have been written with a larger one.
const maxChainLimit = 1000

func whole(c int) bool { return Codec(c) == CodecRaw || Codec(c) == CodecZstd }

// rebase re-encodes prev, now that h (plain bytes cur) replaces it, if the
// rules of PutVersion allow it.
func (s *Store) rebase(ctx context.Context, tx *index.Tx, prev, h Hash, cur []byte) error {
	var p, n versionRow
	err := tx.GetContext(ctx, &p, `SELECT size, stored, codec, depth, prevkey, data FROM blobs WHERE hash = ?`, prev)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return index.Translate(err)
	}
	if err := tx.GetContext(ctx, &n, `SELECT size, stored, codec, depth, prevkey FROM blobs WHERE hash = ?`, h); err != nil {
		return index.Translate(err)
	}
	if !whole(p.Codec) || !whole(n.Codec) || p.Stored < 64 || p.Size > int64(s.opts.DeltaMax) {
		return nil
	}
	old, err := s.decode(ctx, prev, Codec(p.Codec), p.Data, p.Size, Hash{})
	if err != nil || Sum(old) != prev {
		return nil // corrupt: leave it for Verify to report, never build on it
	}

	// The cost prev's segment will have once it closes: one more than its
	// keyframe's, if it has a usable one.
	key, keyCost := p.Prevkey, -1
	var keyChain []Hash
	if !key.IsZero() {
		chain, err := s.chainOf(ctx, tx, key)
		if err != nil || slices.Contains(chain, prev) || slices.Contains(chain, h) {
			key = Hash{}
		} else {
			keyChain, keyCost = chain, len(chain)-1
		}
	}
	budget := s.opts.MaxChain
	if !key.IsZero() && keyCost+1 < s.opts.MaxChain {
		budget = s.opts.MaxChain - (keyCost + 1)
	}

	if p.Depth+1 <= budget && p.Size+int64(len(cur)) <= int64(s.opts.DeltaMax) {
		converted, err := s.encodeAgainst(ctx, tx, prev, p, old, h, cur)
		if err != nil || converted {
			if err == nil {
				_, err = tx.ExecContext(ctx, `UPDATE blobs SET depth = max(depth, ?), prevkey = coalesce(prevkey, ?), created = max(created, ?)
					WHERE hash = ?`, p.Depth+1, key, s.now(), h)
				err = index.Translate(err)
			}
			return err
		}
	}

	// prev's segment closes: prev becomes a forward delta against the
	// previous keyframe if every version resting on it stays in bounds,
	// and the new version starts the next segment with prev as its
	// keyframe.
	if !key.IsZero() && p.Depth+keyCost+1 <= s.opts.MaxChain {
		base, err := s.ReadAll(ctx, key)
		if err == nil && int64(len(base))+p.Size <= int64(s.opts.DeltaMax) {
			converted, err := s.encodeAgainst(ctx, tx, prev, p, old, key, base)
			if err != nil {
				return err
			}
			// Chains now run through prev into the keyframe's chain: every
			// link of it, down to the whole blob, records how long a chain
			// ends there, so a later conversion of that whole blob counts
			// them.
			for i, link := range keyChain {
				if !converted {
					break
				}
				if _, err := tx.ExecContext(ctx, `UPDATE blobs SET depth = max(depth, ?) WHERE hash = ?`, p.Depth+1+i, link); err != nil {
					return index.Translate(err)
				}
			}
		}
	}
	_, err = tx.ExecContext(ctx, `UPDATE blobs SET prevkey = coalesce(prevkey, ?), created = max(created, ?) WHERE hash = ?`, prev, s.now(), h)
	return index.Translate(err)
}

// encodeAgainst stores prev (row p, plain bytes old) as a delta against
// base (plain bytes baseBytes) if that saves at least a quarter of its
// stored bytes, proving first that the delta decodes back to prev.
func (s *Store) encodeAgainst(ctx context.Context, tx *index.Tx, prev Hash, p versionRow, old []byte, base Hash, baseBytes []byte) (bool, error) {
	delta, err := encodeDelta(old, baseBytes, s.opts.Level)
	if err != nil || int64(len(delta)) > p.Stored-p.Stored/4 {
		return false, nil
	}
	if back, err := decodeDelta(delta, baseBytes, p.Size); err != nil || Sum(back) != prev {
		return false, nil
	}
	// The row is replaced rather than updated: a new row goes to the end
	// of the table, and the old one's deletion lets SQLite merge the page
	// it leaves nearly empty. Shrinking rows in place would leave the
	// leaves of a history's versions mostly empty forever.
	if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO blobs (hash, size, stored, codec, base, depth, data, created, saved, prevkey)
		SELECT hash, size, ?, ?, ?, depth, ?, created, saved + ?, prevkey FROM blobs WHERE hash = ? AND codec IN (0, 1)`,
		len(delta), int(CodecDelta), base, delta, p.Stored-int64(len(delta)), prev); err != nil {
		return false, index.Translate(err)
	}
	return true, nil
}

// chainOf returns h and the bases it rests on, in order, ending at a
// whole blob. It fails with ErrCorrupt if a link is missing, a chain ends
// on a chunked blob, or it is longer than any store writes (a cycle).
func (s *Store) chainOf(ctx context.Context, tx *index.Tx, h Hash) ([]Hash, error) {
	chain := []Hash{h}
	for len(chain) <= maxChainLimit+1 {
		var row struct {
			Codec int  `db:"codec"`
			Base  Hash `db:"base"`
		}
		err := tx.GetContext(ctx, &row, `SELECT codec, base FROM blobs WHERE hash = ?`, h)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, corrupt("stat", chain[0], "delta base %s is missing", h)
		}
		if err != nil {
			return nil, index.Translate(err)
		}
		if Codec(row.Codec) != CodecDelta {
			if !whole(row.Codec) {
				return nil, corrupt("stat", chain[0], "delta base %s is stored as %s, not whole", h, Codec(row.Codec))
			}
			return chain, nil
		}
		h = row.Base
		chain = append(chain, h)
	}
	return nil, corrupt("stat", chain[0], "delta chain is longer than any store writes (%d): a cycle", maxChainLimit)
}

// window returns the zstd window that covers a dictionary of n bytes and
// content of m bytes, so matches anywhere in the base are reachable.
func window(n, m int) int {
	w := n + m
	w = max(w, zstd.MinWindowSize)
	return 1 << bits.Len(uint(w-1))
}

func encodeDelta(content, base []byte, level int) ([]byte, error) {
	enc, err := zstd.NewWriter(nil,
		zstd.WithEncoderDictRaw(0, base),
		zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(level)),
		zstd.WithEncoderConcurrency(1),
		zstd.WithWindowSize(window(len(base), len(content))),
		zstd.WithEncoderCRC(false),
		zstd.WithZeroFrames(true))
	if err != nil {
		return nil, err
	}
	defer enc.Close()
	return enc.EncodeAll(content, make([]byte, 0, len(content)/4+64)), nil
}

func decodeDelta(data, base []byte, size int64) ([]byte, error) {
	dec, err := zstd.NewReader(nil,
		zstd.WithDecoderDictRaw(0, base),
		zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderMaxWindow(uint64(window(len(base), int(capHint(size, maxInline))))),
		zstd.WithDecoderMaxMemory(uint64(maxInline)))
	if err != nil {
		return nil, err
	}
	defer dec.Close()
	return dec.DecodeAll(data, make([]byte, 0, capHint(size, maxInline)))
}

// chainLink is one blob on the way from a delta to the whole blob it
// finally rests on.
type chainLink struct {
	hash Hash
	row  blobRow
}

// decodeDelta returns the plain bytes of the delta blob h (stored as data
// against base). It walks the bases to a whole blob, then applies the
// deltas back up, verifying every version on the way, so a corrupted or
// missing base fails with ErrCorrupt naming that base.
func (s *Store) decodeDelta(ctx context.Context, h Hash, data []byte, size int64, base Hash) ([]byte, error) {
	chain := []chainLink{{hash: h, row: blobRow{Size: size, Codec: int(CodecDelta), Base: base, Data: data}}}
	for cur := base; ; {
		if len(chain) > maxChainLimit+1 {
			return nil, corrupt("get", h, "delta chain is longer than any store can write (%d): a cycle through base %s", maxChainLimit, cur)
		}
		var row blobRow
		err := s.db.View(ctx, func(tx *index.Tx) error {
			return tx.GetContext(ctx, &row, `SELECT size, codec, base, data FROM blobs WHERE hash = ?`, cur)
		})
		if errors.Is(err, sql.ErrNoRows) {
			return nil, corrupt("get", h, "delta base %s is missing", cur)
		}
		if err != nil {
			return nil, fmt.Errorf("get %s: base %s: %w", h.Short(), cur.Short(), err)
		}
		chain = append(chain, chainLink{hash: cur, row: row})
		if Codec(row.Codec) != CodecDelta {
			break
		}
		cur = row.Base
	}
	last := chain[len(chain)-1]
	if c := Codec(last.row.Codec); c != CodecRaw && c != CodecZstd {
		return nil, corrupt("get", h, "delta base %s is stored as %s, not whole", last.hash, c)
	}
	plain, err := s.decode(ctx, last.hash, Codec(last.row.Codec), last.row.Data, last.row.Size, Hash{})
	if err == nil && Sum(plain) != last.hash {
		err = corrupt("get", last.hash, "content does not hash to its address")
	}
	if err != nil {
		return nil, corrupt("get", h, "delta base %s: %v", last.hash, err)
	}
	for i := len(chain) - 2; i >= 0; i-- {
		l := chain[i]
		next, err := decodeDelta(l.row.Data, plain, l.row.Size)
		if err == nil && Sum(next) != l.hash {
			err = errors.New("content does not hash to its address")
		}
		if err != nil {
			if i == 0 {
				return nil, corrupt("get", h, "delta against %s: %v", chain[1].hash, err)
			}
			return nil, corrupt("get", h, "delta base %s: %v", l.hash, err)
		}
		plain = next
	}
	return plain, nil
}
