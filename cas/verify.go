package cas

import (
	"context"
	"errors"
	"fmt"

	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/wserr"
)

// Problem is one object that failed verification.
type Problem struct {
	Kind string `json:"kind"` // "blob", "chunk" or "dict"
	Hash Hash   `json:"hash"`
	Err  string `json:"error"`
	// Size is set when the object's content is sound (it hashes to its
	// address) but a size recorded for it is not the content's.
	Size *SizeMismatch `json:"size,omitempty"`
}

// SizeMismatch is a size a row records for an object that its content
// contradicts. The content hashes to the object's address, so Actual is
// the truth and Recorded is the row's error; reads that trust the size
// (ranges, stat, caps, stats) go wrong with it, and a read of a blob
// whose plain size is wrong fails with ErrCorrupt.
type SizeMismatch struct {
	// Field names the size: "size" (the plain length), "stored" (the
	// length of the stored form the row holds; 0 for a chunked blob) or
	// "offset" (the plain offset the chunk list records for chunk Index
	// of a chunked blob).
	Field    string `json:"field"`
	Index    int    `json:"index,omitempty"`
	Recorded int64  `json:"recorded"`
	Actual   int64  `json:"actual"`
}

// sizeProblem returns the Problem of the object of kind at h that m
// describes.
func sizeProblem(kind string, h Hash, m SizeMismatch) Problem {
	var msg string
	switch m.Field {
	case "stored":
		msg = fmt.Sprintf("%s records stored size %d; its row holds %d bytes", kind, m.Recorded, m.Actual)
	case "offset":
		msg = fmt.Sprintf("%s records chunk %d at offset %d; the chunks before it hold %d bytes", kind, m.Index, m.Recorded, m.Actual)
	default:
		msg = fmt.Sprintf("%s records plain size %d; its content has %d bytes", kind, m.Recorded, m.Actual)
	}
	return Problem{Kind: kind, Hash: h, Err: msg, Size: &m}
}

func (p Problem) String() string { return fmt.Sprintf("%s %s: %s", p.Kind, p.Hash, p.Err) }

// VerifyReport counts what Verify checked and lists what failed.
type VerifyReport struct {
	Blobs    int       `json:"blobs"`
	Chunks   int       `json:"chunks"`
	Dicts    int       `json:"dicts"`
	Problems []Problem `json:"problems"`
}

// Verify re-reads and re-hashes every chunk and every blob (as Get reads
// them, so chunk lists, delta bases and dictionaries are checked too) and
// checks that every listed dictionary is one, all in one read
// transaction: a concurrent writer or gc cannot make an object look
// missing or broken. Of an object whose content verifies it compares the
// sizes its row records (plain and stored sizes, chunk offsets, a
// dictionary's listed size) with the content it has just read, and
// reports each that differs as a Problem with Size set. progress, if not
// nil, is called after each object with the count done and the total.
// The error is for failures to run the check; what the check finds is in
// the report.
func (s *Store) Verify(ctx context.Context, progress func(done, total int)) (VerifyReport, error) {
	var rep VerifyReport
	err := s.db.View(ctx, func(tx *index.Tx) error {
		var err error
		rep, err = s.VerifyTx(ctx, tx, progress)
		return err
	})
	return rep, err
}

// unchecked reports whether err says an object could not be read now
// (its storage unreachable or busy, the context ended) rather than that
// it is damaged or missing: verification stops with it, and a store
// whose remote tier is out of reach is never reported corrupt.
func unchecked(err error) bool {
	return err != nil && (wserr.Is(err, wserr.Busy) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded))
}

// VerifyTx is Verify reading the snapshot of tx, for a caller that checks
// more than blobs in the same snapshot. It verifies each object as the
// Storage's Iterate hands it over, so its memory does not grow with the
// store; the Storage's totals (UsageStorage), or a first pass, count the
// objects for progress.
func (s *Store) VerifyTx(ctx context.Context, tx *index.Tx, progress func(done, total int)) (VerifyReport, error) {
	var rep VerifyReport
	total, err := s.count(ctx, tx)
	if err != nil {
		return rep, fmt.Errorf("verify: %w", err)
	}
	if err := s.verifyDicts(ctx, tx, &rep); err != nil {
		return rep, fmt.Errorf("verify: %w", err)
	}
	done := 0
	var buf []byte
	err = s.st.Iterate(ctx, tx, KindChunk, func(o Object) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		b, row, held, err := s.readChunkRow(ctx, tx, o.Hash, buf)
		if unchecked(err) {
			return err
		}
		if err != nil {
			rep.Problems = append(rep.Problems, Problem{Kind: "chunk", Hash: o.Hash, Err: err.Error()})
		} else {
			buf = b
			rep.Problems = appendSizes(rep.Problems, "chunk", o.Hash,
				SizeMismatch{Field: "size", Recorded: row.Size, Actual: int64(len(b))},
				SizeMismatch{Field: "stored", Recorded: row.Stored, Actual: held})
		}
		rep.Chunks++
		done++
		if progress != nil {
			progress(done, total)
		}
		return nil
	})
	if err != nil {
		return rep, fmt.Errorf("verify: %w", err)
	}
	err = s.st.Iterate(ctx, tx, KindBlob, func(o Object) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		sizes, err := s.verifyBlob(ctx, tx, o.Hash)
		if unchecked(err) {
			return err
		}
		if err != nil {
			rep.Problems = append(rep.Problems, Problem{Kind: "blob", Hash: o.Hash, Err: err.Error()})
		}
		rep.Problems = appendSizes(rep.Problems, "blob", o.Hash, sizes...)
		rep.Blobs++
		done++
		if progress != nil {
			progress(done, total)
		}
		return nil
	})
	if err != nil {
		return rep, fmt.Errorf("verify: %w", err)
	}
	return rep, nil
}

// appendSizes appends to ps a size Problem of the object of kind at h for
// each of ms whose recorded size is not the actual one.
func appendSizes(ps []Problem, kind string, h Hash, ms ...SizeMismatch) []Problem {
	for _, m := range ms {
		if m.Recorded != m.Actual {
			ps = append(ps, sizeProblem(kind, h, m))
		}
	}
	return ps
}

// verifyBlob reads the blob at h, in tx, and checks that its content
// hashes to h. It returns the sizes its row records (the plain size, the
// stored size and, for a chunked blob, the chunk offsets) paired with
// what the content says, read in the same pass: nil when the content
// does not verify, as its true sizes are then unknown. A chunk's own
// sizes are its row's, checked in the chunk pass.
func (s *Store) verifyBlob(ctx context.Context, tx *index.Tx, h Hash) ([]SizeMismatch, error) {
	b, row, held, err := s.decodeBlob(ctx, tx, h)
	if err != nil {
		return nil, err
	}
	stored := SizeMismatch{Field: "stored", Recorded: row.Stored, Actual: held}
	if row.Codec == CodecChunked {
		total, offsets, err := s.verifyChunked(ctx, tx, h, row.Chunks)
		if err != nil {
			return nil, err
		}
		return append([]SizeMismatch{{Field: "size", Recorded: row.Size, Actual: total}, stored}, offsets...), nil
	}
	if Sum(b) != h {
		return nil, corrupt("get", h, "content does not hash to its address")
	}
	return []SizeMismatch{{Field: "size", Recorded: row.Size, Actual: int64(len(b))}, stored}, nil
}

// verifyChunked reads the chunks of blob h that refs lists, in order and
// each verified against its own address, and checks that together they
// hash to h. It does not trust the sizes the list records: it returns the
// length of the content and the offsets the list records that are not
// where their chunk starts.
func (s *Store) verifyChunked(ctx context.Context, tx *index.Tx, h Hash, refs []ChunkRef) (int64, []SizeMismatch, error) {
	bp := s.bufs.get()
	defer s.bufs.put(bp)
	whole := newHasher()
	defer freeHasher(whole)
	var total int64
	var offsets []SizeMismatch
	for i, r := range refs {
		if r.Size < 0 {
			return 0, nil, corrupt("get", h, "chunk %s is missing", r.Hash)
		}
		b, err := s.readChunk(ctx, tx, r.Hash, *bp)
		if err != nil {
			return 0, nil, fmt.Errorf("get %s: %w", h.Short(), err)
		}
		if cap(b) > cap(*bp) {
			*bp = b[:cap(b)] // grew: keep the larger buffer
		}
		if r.Off != total {
			offsets = append(offsets, SizeMismatch{Field: "offset", Index: i, Recorded: r.Off, Actual: total})
		}
		whole.Write(b)
		total += int64(len(b))
	}
	if whole.sum() != h {
		return 0, nil, corrupt("get", h, "content does not hash to its address")
	}
	return total, offsets, nil
}

// count returns how many blobs and chunks tx holds.
func (s *Store) count(ctx context.Context, tx *index.Tx) (int, error) {
	if us, ok := s.st.(UsageStorage); ok {
		u, err := us.Usage(ctx, tx)
		if err != nil {
			return 0, err
		}
		n := u.Chunks
		for _, c := range u.ByCodec {
			n += c.Blobs
		}
		return int(n), nil
	}
	total := 0
	for _, kind := range []Kind{KindChunk, KindBlob} {
		if err := s.st.Iterate(ctx, tx, kind, func(Object) error {
			total++
			return nil
		}); err != nil {
			return 0, err
		}
	}
	return total, nil
}
