package cas

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/wsstore/wsstore/index"
)

// What maintenance (gc, fsck, stats, du) needs of the blob rows: an
// inventory, each blob's references, a sweep and totals. Every method reads
// or writes in the caller's transaction, so a collection sees one snapshot;
// none reads a row's data.

// BlobRecord is a blob row as maintenance sees it, without its bytes.
type BlobRecord struct {
	Hash   Hash
	Codec  Codec
	Stored int64 // bytes the row holds
	// Created is the row's created time in Unix nanoseconds; writers
	// refresh it whenever they re-use the row.
	Created int64
	// Base is the blob a delta is made against; zero for none.
	Base Hash
	// Gen is the blob's number in its version history (0 for none). A
	// write that makes the blob the newest version of a history changes
	// it, whatever the writer's clock, so a collector that sees it change
	// knows older versions may now be deltas against the blob.
	Gen int64
	// Chunks lists a chunked blob's chunks in order.
	Chunks []Hash
}

// ChunkRecord is a chunk row as maintenance sees it, without its bytes.
type ChunkRecord struct {
	Hash    Hash
	Stored  int64
	Created int64 // Unix nanoseconds
}

// EachBlobRecord calls fn with every blob row in tx, in no set order. The
// error is fn's or a failed read.
func (s *Store) EachBlobRecord(ctx context.Context, tx *index.Tx, fn func(BlobRecord) error) error {
	chunks := map[Hash][]Hash{}
	err := scanEach(ctx, tx, `SELECT blob, chunk FROM blob_chunks ORDER BY blob, idx`, func(rows *sqlx.Rows) error {
		var b, c Hash
		if err := rows.Scan(&b, &c); err != nil {
			return err
		}
		chunks[b] = append(chunks[b], c)
		return nil
	})
	if err != nil {
		return fmt.Errorf("read blob chunks: %w", err)
	}
	err = scanEach(ctx, tx, `SELECT hash, codec, stored, created, base, gen FROM blobs`, func(rows *sqlx.Rows) error {
		var r BlobRecord
		if err := rows.Scan(&r.Hash, &r.Codec, &r.Stored, &r.Created, &r.Base, &r.Gen); err != nil {
			return err
		}
		r.Chunks = chunks[r.Hash]
		return fn(r)
	})
	if err != nil {
		return fmt.Errorf("read blobs: %w", err)
	}
	return nil
}

// EachChunkRecord calls fn with every chunk row in tx, in no set order.
func (s *Store) EachChunkRecord(ctx context.Context, tx *index.Tx, fn func(ChunkRecord) error) error {
	err := scanEach(ctx, tx, `SELECT hash, stored, created FROM chunks`, func(rows *sqlx.Rows) error {
		var r ChunkRecord
		if err := rows.Scan(&r.Hash, &r.Stored, &r.Created); err != nil {
			return err
		}
		return fn(r)
	})
	if err != nil {
		return fmt.Errorf("read chunks: %w", err)
	}
	return nil
}

// Records reads single blob and chunk rows in one transaction, with
// statements prepared once: a sweep re-reads many rows as they are once it
// holds the write lock. Close it before the transaction ends.
type Records struct {
	ctx                 context.Context
	blob, chunks, chunk *sqlx.Stmt
}

// OpenRecords returns a Records reading in tx.
func (s *Store) OpenRecords(ctx context.Context, tx *index.Tx) (*Records, error) {
	r := &Records{ctx: ctx}
	var err error
	if r.blob, err = prepareStmt(ctx, tx, `SELECT codec, stored, created, base, gen FROM blobs WHERE hash = ?`); err != nil {
		return nil, err
	}
	if r.chunks, err = prepareStmt(ctx, tx, `SELECT chunk FROM blob_chunks WHERE blob = ? ORDER BY idx`); err != nil {
		r.Close()
		return nil, err
	}
	if r.chunk, err = prepareStmt(ctx, tx, `SELECT stored, created FROM chunks WHERE hash = ?`); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// Blob returns blob h's row and whether it is stored.
func (r *Records) Blob(h Hash) (BlobRecord, bool, error) {
	b := BlobRecord{Hash: h}
	err := r.blob.QueryRowContext(r.ctx, h).Scan(&b.Codec, &b.Stored, &b.Created, &b.Base, &b.Gen)
	if errors.Is(err, sql.ErrNoRows) {
		return BlobRecord{}, false, nil
	}
	if err != nil {
		return BlobRecord{}, false, fmt.Errorf("read blob %s: %w", h.Short(), index.Translate(err))
	}
	if b.Codec == CodecChunked {
		if err := r.chunks.SelectContext(r.ctx, &b.Chunks, h); err != nil {
			return BlobRecord{}, false, fmt.Errorf("read blob %s chunks: %w", h.Short(), index.Translate(err))
		}
	}
	return b, true, nil
}

// Chunk returns chunk h's row and whether it is stored.
func (r *Records) Chunk(h Hash) (ChunkRecord, bool, error) {
	c := ChunkRecord{Hash: h}
	err := r.chunk.QueryRowContext(r.ctx, h).Scan(&c.Stored, &c.Created)
	if errors.Is(err, sql.ErrNoRows) {
		return ChunkRecord{}, false, nil
	}
	if err != nil {
		return ChunkRecord{}, false, fmt.Errorf("read chunk %s: %w", h.Short(), index.Translate(err))
	}
	return c, true, nil
}

// Close releases the statements.
func (r *Records) Close() { closeEach(r.blob, r.chunks, r.chunk) }

// SweepBlobs deletes, in tx (a write transaction), each blob of hs whose
// row was created before cutoff (Unix nanoseconds), and calls fn with its
// position in hs, the stored bytes freed and whether it was deleted; a
// blob kept is one refreshed since, or not stored. Deleting a blob deletes
// its chunk list, so sweep blobs before the chunks they listed.
func (s *Store) SweepBlobs(ctx context.Context, tx *index.Tx, hs []Hash, cutoff int64, fn func(i int, freed int64, deleted bool) error) error {
	return sweepEach(ctx, tx, "blob", `DELETE FROM blobs WHERE hash = ? AND created < ? RETURNING stored`, hs, cutoff, fn)
}

// SweepChunks is SweepBlobs for chunks, which it also keeps while any blob
// lists them (a blob written since the caller's snapshot may).
func (s *Store) SweepChunks(ctx context.Context, tx *index.Tx, hs []Hash, cutoff int64, fn func(i int, freed int64, deleted bool) error) error {
	return sweepEach(ctx, tx, "chunk", `DELETE FROM chunks WHERE hash = ?1 AND created < ?2
		AND NOT EXISTS (SELECT 1 FROM blob_chunks WHERE chunk = ?1) RETURNING stored`, hs, cutoff, fn)
}

func sweepEach(ctx context.Context, tx *index.Tx, kind, query string, hs []Hash, cutoff int64, fn func(int, int64, bool) error) error {
	if len(hs) == 0 {
		return nil
	}
	st, err := prepareStmt(ctx, tx, query)
	if err != nil {
		return err
	}
	defer closeEach(st)
	for i, h := range hs {
		var n int64
		err := st.QueryRowContext(ctx, h, cutoff).Scan(&n)
		deleted := true
		switch {
		case errors.Is(err, sql.ErrNoRows):
			n, deleted = 0, false
		case err != nil:
			return fmt.Errorf("delete %s %s: %w", kind, h.Short(), index.Translate(err))
		}
		if err := fn(i, n, deleted); err != nil {
			return err
		}
	}
	return nil
}

// CodecUsage totals the blob rows of one codec.
type CodecUsage struct {
	Codec  Codec
	Blobs  int64
	Size   int64 // plain bytes
	Stored int64 // bytes the rows hold
	// Saved is what delta encoding saved: the bytes the rows held whole,
	// less what they hold as deltas.
	Saved int64
}

// Usage totals what the blob and chunk rows hold.
type Usage struct {
	ByCodec      []CodecUsage // in codec order
	Chunks       int64
	ChunksStored int64
}

// Usage totals the blob and chunk rows in tx.
func (s *Store) Usage(ctx context.Context, tx *index.Tx) (Usage, error) {
	var u Usage
	err := scanEach(ctx, tx, `SELECT codec, count(*), coalesce(sum(size), 0), coalesce(sum(stored), 0), coalesce(sum(saved), 0)
		FROM blobs GROUP BY codec ORDER BY codec`, func(rows *sqlx.Rows) error {
		var c CodecUsage
		if err := rows.Scan(&c.Codec, &c.Blobs, &c.Size, &c.Stored, &c.Saved); err != nil {
			return err
		}
		u.ByCodec = append(u.ByCodec, c)
		return nil
	})
	if err != nil {
		return Usage{}, fmt.Errorf("blob usage: %w", err)
	}
	if err := tx.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(stored), 0) FROM chunks`).Scan(&u.Chunks, &u.ChunksStored); err != nil {
		return Usage{}, fmt.Errorf("chunk usage: %w", index.Translate(err))
	}
	return u, nil
}

func scanEach(ctx context.Context, tx *index.Tx, query string, fn func(rows *sqlx.Rows) error) error {
	rows, err := tx.QueryxContext(ctx, query)
	if err != nil {
		return index.Translate(err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return index.Translate(err)
		}
	}
	return index.Translate(rows.Err())
}

func prepareStmt(ctx context.Context, tx *index.Tx, query string) (*sqlx.Stmt, error) {
	st, err := tx.PreparexContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("prepare: %w", index.Translate(err))
	}
	return st, nil
}

func closeEach(stmts ...*sqlx.Stmt) {
	for _, st := range stmts {
		if st != nil {
			_ = st.Close()
		}
	}
}
