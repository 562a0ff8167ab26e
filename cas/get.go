package cas

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash"
	"io"

	"lukechampine.com/blake3"

	"github.com/wsstore/wsstore/index"
)

// Get returns a reader of the content at h. Content stored in one row is
// decoded and verified before the first byte is returned; chunked content
// is verified chunk by chunk before each chunk's bytes are returned, and as
// a whole at the end. Any mismatch is an error matching ErrCorrupt, so bytes
// that do not hash to their address are never returned as good, whatever
// the storage hands back. Get fails with ErrNotFound if there is no blob at
// h, and with the storage's error if it fails to read.
func (s *Store) Get(ctx context.Context, h Hash) (io.ReadCloser, error) {
	return s.get(ctx, nil, h)
}

// viewIn runs fn in tx, or in a read transaction of its own when tx is nil.
func (s *Store) viewIn(ctx context.Context, tx *index.Tx, fn func(tx *index.Tx) error) error {
	if tx != nil {
		return fn(tx)
	}
	return s.db.View(ctx, fn)
}

// get is Get reading in tx (every chunk of a chunked blob too, so the
// reader must be drained before tx ends), or in transactions of its own
// when tx is nil.
func (s *Store) get(ctx context.Context, in *index.Tx, h Hash) (io.ReadCloser, error) {
	var row Object
	var chain []Object // a delta's objects down to a whole blob
	err := s.viewIn(ctx, in, func(tx *index.Tx) error {
		err := s.st.Get(ctx, tx, KindBlob, h, func(o Object) error {
			row = o
			// One copy out of the storage's buffer, decoded below once the
			// read transaction is done.
			row.Data = cloneData(o.Data)
			return nil
		})
		if errors.Is(err, ErrNotFound) {
			return notFound("get", h)
		}
		if err != nil || row.Codec != CodecDelta {
			return err
		}
		chain, err = s.readChain(ctx, tx, row)
		return err
	})
	if err != nil {
		return nil, wrapOp("get", h, err)
	}
	var b []byte
	switch row.Codec {
	case CodecChunked:
		return s.newChunkReader(ctx, in, h, row.Size, row.Chunks)
	case CodecDelta:
		b, err = s.applyChain(ctx, h, chain)
	default:
		b, err = s.decode(ctx, h, row.Codec, row.Data, row.Size, row.Base)
	}
	if err == nil {
		err = checkPlain(h, b, row.Size)
	}
	if err != nil {
		return nil, err
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

// ReadAll returns the whole content at h, verified. It fails with
// ErrNotFound or ErrCorrupt as Get does.
func (s *Store) ReadAll(ctx context.Context, h Hash) ([]byte, error) {
	rc, err := s.Get(ctx, h)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		// The bytes read so far verified, but they are not the content.
		return nil, err
	}
	return b, nil
}

// checkPlain verifies the plain bytes b decoded for h, of recorded size.
func checkPlain(h Hash, b []byte, size int64) error {
	if int64(len(b)) != size {
		return corrupt("get", h, "decoded %d bytes, want %d", len(b), size)
	}
	if Sum(b) != h {
		return corrupt("get", h, "content does not hash to its address")
	}
	return nil
}

func (s *Store) decode(ctx context.Context, h Hash, codec Codec, data []byte, size int64, base Hash) ([]byte, error) {
	switch codec {
	case CodecRaw:
		return data, nil
	case CodecZstd:
		if !base.IsZero() {
			return s.decodeDict(ctx, h, data, size, base)
		}
		s.decodes.Add(1)
		b, err := s.dec.DecodeAll(data, make([]byte, 0, capHint(size, maxInline)))
		if err != nil {
			return nil, corrupt("get", h, "zstd: %v", err)
		}
		return b, nil
	case CodecDelta:
		return s.decodeDelta(ctx, h, data, size, base)
	}
	return nil, corrupt("get", h, "unknown codec %d", int(codec))
}

// capHint bounds the buffer allocated up front for a recorded size, which a
// corrupt row may overstate; the decoder's own memory limit bounds the rest.
// limit is the most a row of the kind can hold.
func capHint(size, limit int64) int64 {
	return max(0, min(size, limit))
}

// chunkReader streams a chunked blob, loading and verifying one chunk at a
// time.
type chunkReader struct {
	ctx   context.Context
	tx    *index.Tx // nil: each chunk in a read transaction of its own
	s     *Store
	h     Hash
	size  int64
	refs  []ChunkRef
	bp    *[]byte // from s.bufs, reused for every chunk; nil once given back
	cur   []byte  // what is left of the current chunk
	off   int64
	whole hash.Hash
	err   error
}

func (s *Store) newChunkReader(ctx context.Context, tx *index.Tx, h Hash, size int64, refs []ChunkRef) (*chunkReader, error) {
	var total int64
	for _, r := range refs {
		if r.Size < 0 {
			return nil, corrupt("get", h, "chunk %s is missing", r.Hash)
		}
		if r.Off != total {
			return nil, corrupt("get", h, "chunk list has a gap at offset %d", total)
		}
		total += r.Size
	}
	if total != size {
		return nil, corrupt("get", h, "chunks hold %d bytes, want %d", total, size)
	}
	return &chunkReader{ctx: ctx, tx: tx, s: s, h: h, size: size, refs: refs, whole: blake3.New(32, nil)}, nil
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	for len(r.cur) == 0 {
		if len(r.refs) == 0 {
			var got Hash
			r.whole.Sum(got[:0])
			if r.off != r.size || got != r.h {
				return 0, r.fail(corrupt("get", r.h, "content does not hash to its address"))
			}
			return 0, r.fail(io.EOF)
		}
		if r.bp == nil {
			r.bp = r.s.bufs.get()
		}
		b, err := r.s.readChunk(r.ctx, r.tx, r.refs[0].Hash, *r.bp)
		if err != nil {
			return 0, r.fail(fmt.Errorf("get %s: %w", r.h.Short(), err))
		}
		if int64(len(b)) != r.refs[0].Size {
			return 0, r.fail(corrupt("get", r.h, "chunk %s has %d bytes, want %d", r.refs[0].Hash.Short(), len(b), r.refs[0].Size))
		}
		r.whole.Write(b)
		if cap(b) > cap(*r.bp) {
			*r.bp = b[:cap(b)] // grew: keep the larger buffer
		}
		r.cur, r.refs = b, r.refs[1:]
	}
	n := copy(p, r.cur)
	r.cur = r.cur[n:]
	r.off += int64(n)
	return n, nil
}

// fail ends the stream with err (io.EOF at its end) and gives the buffer
// back.
func (r *chunkReader) fail(err error) error {
	r.err = err
	r.cur, r.refs = nil, nil
	if r.bp != nil {
		r.s.bufs.put(r.bp)
		r.bp = nil
	}
	return err
}

func (r *chunkReader) Close() error {
	if r.err == nil {
		r.fail(errors.New("read after close"))
	}
	return nil
}

// readChunk returns the verified plain bytes of one chunk, in dst's memory
// if it is large enough, read in tx (nil: a read transaction of its own).
func (s *Store) readChunk(ctx context.Context, in *index.Tx, h Hash, dst []byte) ([]byte, error) {
	var b []byte
	err := s.viewIn(ctx, in, func(tx *index.Tx) error {
		// The stored bytes are decoded or copied straight from the
		// storage's buffer, so a chunk costs one copy of garbage, not two.
		return s.st.Get(ctx, tx, KindChunk, h, func(o Object) error {
			var err error
			switch o.Codec {
			case CodecRaw:
				b = append(dst[:0], o.Data...)
			case CodecZstd:
				b, err = s.dec.DecodeAll(o.Data, dst[:0])
				if err != nil {
					return corrupt("read chunk", h, "zstd: %v", err)
				}
			default:
				return corrupt("read chunk", h, "unknown codec %d", int(o.Codec))
			}
			return nil
		})
	})
	if errors.Is(err, ErrNotFound) {
		return nil, corrupt("read chunk", h, "chunk is missing")
	}
	if err != nil {
		return nil, err
	}
	if Sum(b) != h {
		return nil, corrupt("read chunk", h, "chunk does not hash to its address")
	}
	return b, nil
}
