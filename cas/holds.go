package cas

import (
	"context"
	"crypto/rand"
	"fmt"
	"math"
	"time"

	"github.com/wsstore/wsstore/index"
)

// A Put that streams commits each chunk in a transaction of its own and
// lists them in its blob only at its end, so one abandoned part way (its
// context cancelled, its reader failed, the store cap reached) would leave
// every chunk it stored for a gc after the grace, and a capped store full
// of them meanwhile. Chunks are content-addressed and shared: another Put
// in progress, in this process or another, may have found one this Put
// stored and list it at its own end. So each such Put records the chunks
// it stores or finds in chunk_holds, in the transaction that stores or
// finds each, and an abandoned Put, in one write transaction, drops its
// holds and deletes each of its chunks that no other Put holds and no
// stored blob lists. Under the write lock, a Put that finds such a chunk
// later finds it gone and stores it again; one that found it earlier holds
// it. A process that dies part way leaves its holds and chunks for gc.

// putHold is one streaming Put's claim on the chunks it stored or found.
type putHold struct {
	id     [16]byte
	chunks []Hash
}

// newPutHold returns a hold with a fresh id.
func (s *Store) newPutHold() *putHold {
	p := &putHold{}
	_, _ = rand.Read(p.id[:]) // never fails (crypto/rand)
	return p
}

// hold records, in tx, that p relies on chunk h, at now (Unix
// nanoseconds): a hold ages as its chunk does from its last touch, so gc
// drops it with the chunk's grace, not the Put's start; the caller adds h
// to p.chunks once tx has committed.
func (p *putHold) hold(ctx context.Context, tx *index.Tx, h Hash, now int64) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO chunk_holds (chunk, put, since) VALUES (?, ?, ?)
		ON CONFLICT (chunk, put) DO UPDATE SET since = excluded.since`, h[:], p.id[:], now); err != nil {
		return fmt.Errorf("hold chunk %s: %w", h.Short(), index.Translate(err))
	}
	return nil
}

// release drops p's holds in tx, the one that lists its chunks in a blob.
func (p *putHold) release(ctx context.Context, tx *index.Tx) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM chunk_holds WHERE put = ?`, p.id[:]); err != nil {
		return fmt.Errorf("release chunks: %w", index.Translate(err))
	}
	return nil
}

// abandon drops p's holds and deletes, whatever their age, the chunks p
// held that no other Put holds and no stored blob lists (the storage's
// Delete keeps a listed chunk). It runs after p's context may have ended;
// if it fails, the chunks wait for gc as they would have.
func (s *Store) abandon(ctx context.Context, p *putHold) {
	if len(p.chunks) == 0 {
		return
	}
	ctx = context.WithoutCancel(ctx)
	_ = s.db.Update(ctx, func(tx *index.Tx) error {
		if err := p.release(ctx, tx); err != nil {
			return err
		}
		always := time.Unix(0, math.MaxInt64) // young or not
		seen := make(map[Hash]bool, len(p.chunks))
		for _, h := range p.chunks {
			if seen[h] {
				continue
			}
			seen[h] = true
			var held bool
			if err := tx.GetContext(ctx, &held, `SELECT EXISTS (SELECT 1 FROM chunk_holds WHERE chunk = ?)`, h[:]); err != nil {
				return index.Translate(err)
			}
			if held {
				continue
			}
			if _, _, err := s.st.Delete(ctx, tx, KindChunk, h, always); err != nil {
				return err
			}
		}
		return nil
	})
}
