package cas

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/wsstore/wsstore/index"
)

// What maintenance (gc, fsck, stats, du) needs of the stored objects: an
// inventory, each blob's references, a sweep and totals. Every method goes
// through the Store's Storage in the caller's transaction, so a collection
// sees one snapshot whatever keeps the objects; none reads an object's
// data but Usage over a HistoryStorage without UsageStorage.

// BlobRecord is a blob as maintenance sees it, without its bytes.
type BlobRecord struct {
	Hash   Hash
	Codec  Codec
	Size   int64 // plain bytes, as the row records them
	Stored int64 // bytes the stored form holds
	// Created is the blob's created time in Unix nanoseconds; writers
	// refresh it whenever they re-use the blob.
	Created int64
	// Base is the blob a delta is made against; zero for none.
	Base Hash
	// Gen is the blob's number in its version history (0 for none). A
	// write that makes the blob the newest version of a history changes
	// it, whatever the writer's clock, so a collector that sees it change
	// knows older versions may now be deltas against the blob.
	// EachBlobRecord and Records.Blob leave it 0; Records.Gen reads it.
	Gen int64
	// Chunks lists a chunked blob's chunks in order.
	Chunks []Hash
}

// ChunkRecord is a chunk as maintenance sees it, without its bytes.
type ChunkRecord struct {
	Hash    Hash
	Stored  int64
	Created int64 // Unix nanoseconds
}

func blobRecord(o Object) BlobRecord {
	r := BlobRecord{Hash: o.Hash, Codec: o.Codec, Size: o.Size, Stored: o.Stored, Created: nanos(o.Created), Base: o.Base}
	for _, c := range o.Chunks {
		r.Chunks = append(r.Chunks, c.Hash)
	}
	return r
}

// EachBlobRecord calls fn with every blob in tx, in no set order: the
// Storage's Iterate, with the chunk lists of chunked blobs (read as each
// comes, since Iterate's fn may use tx). Gen is left 0: Records.Gen reads
// it for the blobs a collector needs it of. Nothing is gathered across
// blobs, so memory does not grow with the store. The error is fn's or a
// failed read.
func (s *Store) EachBlobRecord(ctx context.Context, tx *index.Tx, fn func(BlobRecord) error) error {
	var b Batch
	defer func() {
		if b != nil {
			_ = b.Close()
		}
	}()
	err := s.st.Iterate(ctx, tx, KindBlob, func(o Object) error {
		r := blobRecord(o)
		if o.Codec == CodecChunked {
			if b == nil {
				var err error
				if b, err = s.batch(ctx, tx); err != nil {
					return err
				}
			}
			o, err := b.Stat(ctx, KindBlob, r.Hash)
			if err != nil {
				return fmt.Errorf("read blob %s chunks: %w", r.Hash.Short(), err)
			}
			r.Chunks = blobRecord(o).Chunks
		}
		return fn(r)
	})
	if err != nil {
		return fmt.Errorf("read blobs: %w", err)
	}
	return nil
}

// EachChunkRecord calls fn with every chunk in tx, in no set order.
func (s *Store) EachChunkRecord(ctx context.Context, tx *index.Tx, fn func(ChunkRecord) error) error {
	err := s.st.Iterate(ctx, tx, KindChunk, func(o Object) error {
		return fn(ChunkRecord{Hash: o.Hash, Stored: o.Stored, Created: nanos(o.Created)})
	})
	if err != nil {
		return fmt.Errorf("read chunks: %w", err)
	}
	return nil
}

// batch returns the Storage's own Batch if it has the ability, else one
// that calls its methods.
func (s *Store) batch(ctx context.Context, tx *index.Tx) (Batch, error) {
	if b, ok := s.st.(Batcher); ok {
		batch, err := b.Batch(ctx, tx)
		if err != nil {
			return nil, fmt.Errorf("open batch: %w", err)
		}
		return batch, nil
	}
	return &storageBatch{st: s.st, hist: s.hist, tx: tx}, nil
}

// storageBatch is the Batch of a Storage without the ability: each call
// is the Storage's own.
type storageBatch struct {
	st   Storage
	hist HistoryStorage
	tx   *index.Tx
}

func (b *storageBatch) Stat(ctx context.Context, kind Kind, h Hash) (Object, error) {
	return b.st.Stat(ctx, b.tx, kind, h)
}

func (b *storageBatch) Gen(ctx context.Context, h Hash) (int64, error) {
	if b.hist == nil {
		_, err := b.st.Stat(ctx, b.tx, KindBlob, h)
		return 0, err
	}
	v, err := b.hist.Version(ctx, b.tx, h)
	return v.Gen, err
}

func (b *storageBatch) Delete(ctx context.Context, kind Kind, h Hash, cutoff time.Time) (int64, bool, error) {
	return b.st.Delete(ctx, b.tx, kind, h, cutoff)
}

func (b *storageBatch) Close() error { return nil }

// Records reads single blobs and chunks in one transaction, through the
// Storage's Batch where it has one: a sweep re-reads many objects as they
// are once it holds the write lock. Close it before the transaction ends.
type Records struct {
	ctx context.Context
	b   Batch
}

// OpenRecords returns a Records reading in tx.
func (s *Store) OpenRecords(ctx context.Context, tx *index.Tx) (*Records, error) {
	b, err := s.batch(ctx, tx)
	if err != nil {
		return nil, err
	}
	return &Records{ctx: ctx, b: b}, nil
}

// Blob returns blob h's record, Gen left 0, and whether it is stored.
func (r *Records) Blob(h Hash) (BlobRecord, bool, error) {
	o, err := r.b.Stat(r.ctx, KindBlob, h)
	if errors.Is(err, ErrNotFound) {
		return BlobRecord{}, false, nil
	}
	if err != nil {
		return BlobRecord{}, false, fmt.Errorf("read blob %s: %w", h.Short(), err)
	}
	return blobRecord(o), true, nil
}

// Gen returns blob h's number in its version history: 0 when it belongs
// to none or is not stored.
func (r *Records) Gen(h Hash) (int64, error) {
	gen, err := r.b.Gen(r.ctx, h)
	if errors.Is(err, ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read blob %s gen: %w", h.Short(), err)
	}
	return gen, nil
}

// Chunk returns chunk h's record and whether it is stored.
func (r *Records) Chunk(h Hash) (ChunkRecord, bool, error) {
	o, err := r.b.Stat(r.ctx, KindChunk, h)
	if errors.Is(err, ErrNotFound) {
		return ChunkRecord{}, false, nil
	}
	if err != nil {
		return ChunkRecord{}, false, fmt.Errorf("read chunk %s: %w", h.Short(), err)
	}
	return ChunkRecord{Hash: h, Stored: o.Stored, Created: nanos(o.Created)}, true, nil
}

// Close releases what the reads hold.
func (r *Records) Close() { _ = r.b.Close() }

// SweepBlobs deletes, in tx (a write transaction), each blob of hs
// created before cutoff (Unix nanoseconds), and calls fn with its
// position in hs, the stored bytes freed and whether it was deleted; a
// blob kept is one refreshed since, or not stored. Deleting a blob deletes
// its chunk list, so sweep blobs before the chunks they listed.
func (s *Store) SweepBlobs(ctx context.Context, tx *index.Tx, hs []Hash, cutoff int64, fn func(i int, freed int64, deleted bool) error) error {
	return s.sweep(ctx, tx, KindBlob, hs, cutoff, fn)
}

// SweepChunks is SweepBlobs for chunks, which it also keeps while any blob
// lists them (a blob written since the caller's snapshot may): the
// Storage's Delete promises it. Holds on chunks (holds.go) taken before
// cutoff go too: a put that old is one gc treats as gone, as it treats
// its chunks, most often one whose process died part way.
func (s *Store) SweepChunks(ctx context.Context, tx *index.Tx, hs []Hash, cutoff int64, fn func(i int, freed int64, deleted bool) error) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM chunk_holds WHERE since < ?`, cutoff); err != nil {
		return fmt.Errorf("drop old chunk holds: %w", index.Translate(err))
	}
	return s.sweep(ctx, tx, KindChunk, hs, cutoff, fn)
}

func (s *Store) sweep(ctx context.Context, tx *index.Tx, kind Kind, hs []Hash, cutoff int64, fn func(int, int64, bool) error) error {
	if len(hs) == 0 {
		return nil
	}
	b, err := s.batch(ctx, tx)
	if err != nil {
		return err
	}
	defer b.Close()
	before := time.Unix(0, cutoff)
	for i, h := range hs {
		n, deleted, err := b.Delete(ctx, kind, h, before)
		if err != nil {
			return fmt.Errorf("delete %s %s: %w", kind, h.Short(), err)
		}
		if err := fn(i, n, deleted); err != nil {
			return err
		}
	}
	return nil
}

// CodecUsage totals the blobs of one codec.
type CodecUsage struct {
	Codec  Codec
	Blobs  int64
	Size   int64 // plain bytes
	Stored int64 // bytes the stored forms hold
	// Saved is what delta encoding saved: the bytes the blobs held whole,
	// less what they hold as deltas.
	Saved int64
}

// Usage totals what the blobs and chunks hold.
type Usage struct {
	ByCodec      []CodecUsage // in codec order, codecs with no blob left out
	Chunks       int64
	ChunksStored int64
}

// Usage totals the blobs and chunks in tx: the Storage's own totals if it
// is a UsageStorage, else a sum over Iterate.
func (s *Store) Usage(ctx context.Context, tx *index.Tx) (Usage, error) {
	if us, ok := s.st.(UsageStorage); ok {
		return us.Usage(ctx, tx)
	}
	return s.iterateUsage(ctx, tx)
}

func (s *Store) iterateUsage(ctx context.Context, tx *index.Tx) (Usage, error) {
	var u Usage
	by := map[Codec]*CodecUsage{}
	var codecs []Codec
	err := s.st.Iterate(ctx, tx, KindBlob, func(o Object) error {
		c := by[o.Codec]
		if c == nil {
			c = &CodecUsage{Codec: o.Codec}
			by[o.Codec] = c
			codecs = append(codecs, o.Codec)
		}
		c.Blobs++
		c.Size += o.Size
		c.Stored += o.Stored
		if s.hist != nil {
			v, err := s.hist.Version(ctx, tx, o.Hash)
			if err != nil {
				return err
			}
			c.Saved += v.Saved
		}
		return nil
	})
	if err != nil {
		return Usage{}, fmt.Errorf("blob usage: %w", err)
	}
	slices.Sort(codecs)
	for _, c := range codecs {
		u.ByCodec = append(u.ByCodec, *by[c])
	}
	err = s.st.Iterate(ctx, tx, KindChunk, func(o Object) error {
		u.Chunks++
		u.ChunksStored += o.Stored
		return nil
	})
	if err != nil {
		return Usage{}, fmt.Errorf("chunk usage: %w", err)
	}
	return u, nil
}

// TellsReferences reports whether the Store's Storage can answer
// Referenced (ReferenceStorage).
func (s *Store) TellsReferences() bool {
	_, ok := s.st.(ReferenceStorage)
	return ok
}

// Referenced reports whether a stored blob names the object of kind at h
// (as its delta base, or in its chunk list). It fails with
// errors.ErrUnsupported over a Storage that cannot tell (TellsReferences).
func (s *Store) Referenced(ctx context.Context, tx *index.Tx, kind Kind, h Hash) (bool, error) {
	rs, ok := s.st.(ReferenceStorage)
	if !ok {
		return false, errors.ErrUnsupported
	}
	if kind == KindBlob {
		// A listed dictionary is a root of its own: the blobs compressed
		// with it are not all it is kept for.
		listed, err := dictListed(ctx, tx, h)
		if err != nil || listed {
			return listed, err
		}
	}
	return rs.Referenced(ctx, tx, kind, h)
}

// DeleteObject deletes, in tx (a write transaction), the object of kind
// at h if it was created before cutoff (Unix nanoseconds), as the
// Storage's Delete does (a chunk a stored blob lists stays), and returns
// the stored bytes freed and whether it went.
func (s *Store) DeleteObject(ctx context.Context, tx *index.Tx, kind Kind, h Hash, cutoff int64) (int64, bool, error) {
	n, ok, err := s.st.Delete(ctx, tx, kind, h, time.Unix(0, cutoff))
	if err != nil {
		return 0, false, fmt.Errorf("delete %s %s: %w", kind, h.Short(), err)
	}
	return n, ok, nil
}
