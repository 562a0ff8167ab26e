package cas

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/bits"

	"github.com/klauspost/compress/zstd"

	"github.com/wsstore/wsstore/index"
)

// Delta storage uses reverse deltas, as Fossil does: the newest version of
// a file is stored whole, and when a new version arrives the previous one
// is re-encoded as a zstd frame that uses the new version's bytes as a raw
// dictionary. So reading the newest version (what a live workspace reads)
// is a plain read, and older versions cost one delta application per newer
// version between them and a whole blob.
//
// The chain is bounded: a whole blob's depth column holds the length of the
// longest delta chain that ends at it, and a previous version is only
// turned into a delta if the chain through it stays within MaxChain; past
// that it stays whole, a keyframe that starts a new chain. Only a whole blob
// is ever re-encoded, and only against a whole blob, so chains cannot form
// cycles: the base of a new delta has no base of its own.
//
// A blob's address never changes: it is BLAKE3 of the plain bytes whatever
// the codec, and every read verifies every step of the chain.

// PutVersion stores b, which replaces the content at prev (a path's
// previous version; the zero Hash for none), and returns b's address. b is
// stored whole; prev is re-encoded as a delta against b when that saves at
// least a quarter of prev's stored bytes, both fit in Options.DeltaMax and
// the chain stays within Options.MaxChain. A failure to build a delta only
// leaves prev as it was; errors are those of PutBytes and of the index.
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

// rebase re-encodes prev as a delta against h (whose plain bytes are cur)
// if the rules of PutVersion allow it.
func (s *Store) rebase(ctx context.Context, tx *index.Tx, prev, h Hash, cur []byte) error {
	var p struct {
		Size   int64  `db:"size"`
		Stored int64  `db:"stored"`
		Codec  int    `db:"codec"`
		Depth  int    `db:"depth"`
		Data   []byte `db:"data"`
	}
	err := tx.GetContext(ctx, &p, `SELECT size, stored, codec, depth, data FROM blobs WHERE hash = ?`, prev)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return index.Translate(err)
	}
	whole := func(c int) bool { return Codec(c) == CodecRaw || Codec(c) == CodecZstd }
	if !whole(p.Codec) || p.Depth+1 > s.opts.MaxChain || p.Size+int64(len(cur)) > int64(s.opts.DeltaMax) || p.Stored < 64 {
		return nil
	}
	var baseCodec int
	if err := tx.GetContext(ctx, &baseCodec, `SELECT codec FROM blobs WHERE hash = ?`, h); err != nil {
		return index.Translate(err)
	}
	if !whole(baseCodec) {
		return nil
	}
	old, err := s.decode(ctx, prev, Codec(p.Codec), p.Data, p.Size, Hash{})
	if err != nil || Sum(old) != prev {
		return nil // corrupt: leave it for Verify to report, never build on it
	}
	delta, err := encodeDelta(old, cur, s.opts.Level)
	if err != nil || int64(len(delta)) > p.Stored-p.Stored/4 {
		return nil
	}
	// Prove the delta decodes to prev before it replaces the only copy.
	if back, err := decodeDelta(delta, cur, p.Size); err != nil || Sum(back) != prev {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `UPDATE blobs SET codec = ?, base = ?, data = ?, stored = ?, saved = saved + ?
		WHERE hash = ? AND codec IN (0, 1)`, int(CodecDelta), h, delta, len(delta), p.Stored-int64(len(delta)), prev); err != nil {
		return index.Translate(err)
	}
	_, err = tx.ExecContext(ctx, `UPDATE blobs SET depth = max(depth, ?), created = max(created, ?) WHERE hash = ?`, p.Depth+1, s.now(), h)
	return index.Translate(err)
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
		if len(chain) > 2*s.opts.MaxChain+2 {
			return nil, corrupt("get", h, "delta chain is longer than %d: a cycle through base %s", 2*s.opts.MaxChain+2, cur)
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

// chainDepth returns how many delta applications reading h takes.
func (s *Store) chainDepth(ctx context.Context, tx *index.Tx, h Hash) (int, error) {
	depth := 0
	for {
		var row struct {
			Codec int  `db:"codec"`
			Base  Hash `db:"base"`
		}
		if err := tx.GetContext(ctx, &row, `SELECT codec, base FROM blobs WHERE hash = ?`, h); err != nil {
			return depth, err
		}
		if Codec(row.Codec) != CodecDelta || depth > 2*s.opts.MaxChain+2 {
			return depth, nil
		}
		depth++
		h = row.Base
	}
}
