package cas

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/wserr"
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

// GetRange returns a reader of the n bytes of the content at h that start
// at offset off (n < 0: up to the end); a range past the end is cut at
// the end. Chunked content reads only the chunks the range overlaps, each
// verified against its own address before its bytes are returned (the
// whole content's hash needs every byte, so only a read of it all checks
// it); content stored in one row is decoded and verified whole, then
// sliced. It fails as Get does, and with workspace.invalid_argument for a negative off.
func (s *Store) GetRange(ctx context.Context, h Hash, off, n int64) (io.ReadCloser, error) {
	if off < 0 {
		return nil, &wserr.Error{Code: wserr.InvalidArgument, Op: "get", Path: h.String(), Msg: fmt.Sprintf("negative offset %d", off)}
	}
	var row Object
	err := s.db.View(ctx, func(tx *index.Tx) error {
		err := s.st.Get(ctx, tx, KindBlob, h, func(o Object) error {
			row = o
			row.Data = nil
			return nil
		})
		if errors.Is(err, ErrNotFound) {
			return notFound("get", h)
		}
		return err
	})
	if err != nil {
		return nil, wrapOp("get", h, err)
	}
	if row.Codec != CodecChunked {
		rc, err := s.Get(ctx, h)
		if err != nil {
			return nil, err
		}
		return sliceReader(rc, off, n)
	}
	r, err := s.newChunkReader(ctx, nil, h, row.Size, row.Chunks)
	if err != nil {
		return nil, err
	}
	r.seek(off, n)
	return r, nil
}

// sliceReader returns the n bytes of rc from off (n < 0: to the end),
// closing rc when it is closed.
func sliceReader(rc io.ReadCloser, off, n int64) (io.ReadCloser, error) {
	if _, err := io.CopyN(io.Discard, rc, off); err != nil && err != io.EOF {
		rc.Close()
		return nil, err
	}
	var r io.Reader = rc
	if n >= 0 {
		r = io.LimitReader(rc, n)
	}
	return struct {
		io.Reader
		io.Closer
	}{r, rc}, nil
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
	b, row, err := s.readBlob(ctx, in, h)
	if err != nil {
		return nil, err
	}
	if row.Codec == CodecChunked {
		return s.newChunkReader(ctx, in, h, row.Size, row.Chunks)
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

// readBlob returns the verified plain bytes of the blob at h, read in tx
// (nil: a read transaction of its own), unless it is chunked: then it
// returns only its row, for a chunk reader. A blob stored whole is
// decoded straight from the storage's buffer, so its stored bytes are
// copied once, by the storage, and its plain bytes are the only other
// memory it takes.
func (s *Store) readBlob(ctx context.Context, in *index.Tx, h Hash) ([]byte, Object, error) {
	b, row, _, err := s.decodeBlob(ctx, in, h)
	if err == nil && row.Codec != CodecChunked {
		err = checkPlain(h, b, row.Size)
	}
	if err != nil {
		return nil, Object{}, err
	}
	return b, row, nil
}

// decodeBlob is readBlob without checking the plain bytes against the
// address and the recorded size, for Verify, which tells a size the row
// gets wrong from content that is wrong. held is the length of the stored
// form the row holds (0 for a chunked blob).
func (s *Store) decodeBlob(ctx context.Context, in *index.Tx, h Hash) (b []byte, row Object, held int64, err error) {
	var chain deltaChain
	// A decode error is the blob's, not the read's: it is returned as
	// the decoder said it.
	var decodeErr error
	later := false // copied out, to be decoded once the row is read
	err = s.viewIn(ctx, in, func(tx *index.Tx) error {
		err := s.st.Get(ctx, tx, KindBlob, h, func(o Object) error {
			row = o
			row.Data = nil
			held = int64(len(o.Data))
			switch {
			case o.Codec == CodecChunked:
			case o.Codec == CodecDelta:
				// A delta is small; it is applied once its bases are read.
				row.Data = cloneData(o.Data)
			case decodesAlone(o):
				b, decodeErr = s.ownDecode(ctx, o)
			default:
				row.Data, later = cloneData(o.Data), true
			}
			return nil
		})
		if errors.Is(err, ErrNotFound) {
			return notFound("get", h)
		}
		if err == nil && later {
			b, decodeErr = s.decodeIn(ctx, tx, h, row.Codec, row.Data, row.Size, row.Base)
		}
		if err != nil || row.Codec != CodecDelta {
			return err
		}
		chain, err = s.readChain(ctx, tx, row)
		return err
	})
	if err != nil {
		return nil, Object{}, 0, wrapOp("get", h, err)
	}
	switch row.Codec {
	case CodecChunked:
		return nil, row, held, nil
	case CodecDelta:
		b, err = s.applyChain(h, chain)
	default:
		err = decodeErr
	}
	if err != nil {
		return nil, Object{}, 0, err
	}
	return b, row, held, nil
}

// decodesAlone reports whether o, a row stored whole, decodes without
// reading anything more from the store, so a storage callback may decode
// it: a blob compressed with a dictionary may need the dictionary read,
// which waits for the callback's statement to end (it is small, and is
// copied out instead).
func decodesAlone(o Object) bool {
	return o.Codec == CodecRaw || (o.Codec == CodecZstd && o.Base.IsZero())
}

// ownDecode returns the plain bytes of o, a row stored whole, in memory of
// their own: o.Data may be the storage's buffer.
func (s *Store) ownDecode(ctx context.Context, o Object) ([]byte, error) {
	b, err := s.decode(ctx, o.Hash, o.Codec, o.Data, o.Size, o.Base)
	if err == nil && o.Codec == CodecRaw {
		b = cloneData(b)
	}
	return b, err
}

// ReadAll returns the whole content at h, verified. It fails with
// ErrNotFound or ErrCorrupt as Get does.
func (s *Store) ReadAll(ctx context.Context, h Hash) ([]byte, error) {
	return s.ReadAllIn(ctx, nil, h)
}

// ReadAllIn is ReadAll reading in tx (nil: a read transaction of its
// own). A writer that reads the version it is about to replace reads it
// in its own transaction, on the write connection, whose page cache
// usually still holds it from the write that stored it.
func (s *Store) ReadAllIn(ctx context.Context, tx *index.Tx, h Hash) ([]byte, error) {
	b, row, err := s.readBlob(ctx, tx, h)
	if err != nil || row.Codec != CodecChunked {
		return b, err
	}
	r, err := s.newChunkReader(ctx, tx, h, row.Size, row.Chunks)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	// Read into room for the recorded size; a stream that does not end
	// there grows the buffer as io.ReadAll would.
	b = make([]byte, 0, capHint(row.Size, maxInline))
	for {
		if len(b) == cap(b) {
			// A read of nothing at the recorded size ends the stream
			// (checking the whole content's hash) without growing b.
			if _, err := r.Read(nil); err != nil {
				return readEnd(b, err)
			}
			b = slices.Grow(b, 1)
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			return readEnd(b, err)
		}
	}
}

// readEnd is what ReadAll returns for b read up to err.
func readEnd(b []byte, err error) ([]byte, error) {
	if err == io.EOF {
		return b, nil
	}
	// The bytes read so far verified, but they are not the content.
	return nil, err
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
	return s.decodeIn(ctx, nil, h, codec, data, size, base)
}

// decodeIn is decode reading a dictionary it has not loaded in tx (nil: a
// read transaction of its own), so that a decode in a read transaction
// never waits for a second read connection.
func (s *Store) decodeIn(ctx context.Context, tx *index.Tx, h Hash, codec Codec, data []byte, size int64, base Hash) ([]byte, error) {
	switch codec {
	case CodecRaw:
		return data, nil
	case CodecZstd:
		if !base.IsZero() {
			return s.decodeDict(ctx, tx, h, data, size, base)
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
	whole *hasher // nil for a range: its bytes cannot be checked whole
	// skip is how many bytes of the next chunk read precede the range;
	// left how many the range still holds (-1: up to the end).
	skip, left int64
	err        error
}

// seek makes r a reader of the n bytes from off (n < 0: to the end): the
// chunks before off are never read.
func (r *chunkReader) seek(off, n int64) {
	if r.whole != nil {
		freeHasher(r.whole)
	}
	r.whole, r.left = nil, n
	if off >= r.size {
		r.refs, r.off = nil, r.size
		return
	}
	i := 0
	for i+1 < len(r.refs) && r.refs[i+1].Off <= off {
		i++
	}
	r.skip = off - r.refs[i].Off
	r.refs, r.off = r.refs[i:], off
	if n >= 0 && n < r.size-off {
		// Drop the chunks past the range (one that reaches the end
		// keeps them all: off+n may be past any int64).
		j := 0
		for j < len(r.refs) && r.refs[j].Off < off+n {
			j++
		}
		r.refs = r.refs[:j]
	}
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
	return &chunkReader{ctx: ctx, tx: tx, s: s, h: h, size: size, refs: refs, whole: newHasher(), left: -1}, nil
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	if r.left == 0 {
		return 0, r.fail(io.EOF)
	}
	for len(r.cur) == 0 {
		if len(r.refs) == 0 {
			if r.whole == nil {
				return 0, r.fail(io.EOF)
			}
			if r.off != r.size || r.whole.sum() != r.h {
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
		if r.whole != nil {
			r.whole.Write(b)
		}
		if cap(b) > cap(*r.bp) {
			*r.bp = b[:cap(b)] // grew: keep the larger buffer
		}
		r.cur, r.refs = b[min(r.skip, int64(len(b))):], r.refs[1:]
		r.skip = 0
	}
	if r.left >= 0 && int64(len(p)) > r.left {
		p = p[:r.left]
	}
	n := copy(p, r.cur)
	if r.left > 0 {
		r.left -= int64(n)
	}
	r.cur = r.cur[n:]
	r.off += int64(n)
	return n, nil
}

// fail ends the stream with err (io.EOF at its end) and gives the buffer
// back.
func (r *chunkReader) fail(err error) error {
	r.err = err
	r.cur, r.refs = nil, nil
	if r.whole != nil {
		freeHasher(r.whole)
		r.whole = nil
	}
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
	b, _, _, err := s.readChunkRow(ctx, in, h, dst)
	return b, err
}

// readChunkRow is readChunk that also returns the chunk's row as it was
// read, without Data, and the length of the stored form it holds.
func (s *Store) readChunkRow(ctx context.Context, in *index.Tx, h Hash, dst []byte) (b []byte, row Object, held int64, err error) {
	s.chunkReads.Add(1)
	err = s.viewIn(ctx, in, func(tx *index.Tx) error {
		// The stored bytes are decoded or copied straight from the
		// storage's buffer, so a chunk costs one copy of garbage, not two.
		return s.st.Get(ctx, tx, KindChunk, h, func(o Object) error {
			row, held = o, int64(len(o.Data))
			row.Data = nil
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
		return nil, Object{}, 0, corrupt("read chunk", h, "chunk is missing")
	}
	if err != nil {
		return nil, Object{}, 0, err
	}
	if Sum(b) != h {
		return nil, Object{}, 0, corrupt("read chunk", h, "chunk does not hash to its address")
	}
	return b, row, held, nil
}
