package cas

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/wserr"
)

// Problem is one object that failed verification.
type Problem struct {
	Kind string `json:"kind"` // "blob", "chunk" or "dict"
	Hash Hash   `json:"hash"`
	Err  string `json:"error"`
}

func (p Problem) String() string { return fmt.Sprintf("%s %s: %s", p.Kind, p.Hash, p.Err) }

// VerifyReport counts what Verify checked and lists what failed.
type VerifyReport struct {
	Blobs    int       `json:"blobs"`
	Chunks   int       `json:"chunks"`
	Dicts    int       `json:"dicts"`
	Problems []Problem `json:"problems"`
}

// Verify re-reads and re-hashes every chunk and every blob (through Get, so
// chunk lists, delta bases and dictionaries are checked too) and checks
// that every listed dictionary is one, all in one read
// transaction: a concurrent writer or gc cannot make an object look
// missing or broken. progress, if not nil, is called after each object
// with the count done and the total. The error is for failures to run the
// check; what the check finds is in the report.
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
		b, err := s.readChunk(ctx, tx, o.Hash, buf)
		if unchecked(err) {
			return err
		}
		if err != nil {
			rep.Problems = append(rep.Problems, Problem{Kind: "chunk", Hash: o.Hash, Err: err.Error()})
		} else {
			buf = b
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
		err := s.verifyBlob(ctx, tx, o.Hash)
		if unchecked(err) {
			return err
		}
		if err != nil {
			rep.Problems = append(rep.Problems, Problem{Kind: "blob", Hash: o.Hash, Err: err.Error()})
		}
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

func (s *Store) verifyBlob(ctx context.Context, tx *index.Tx, h Hash) error {
	rc, err := s.get(ctx, tx, h)
	if err != nil {
		return err
	}
	defer rc.Close()
	_, err = io.Copy(io.Discard, rc)
	return err
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
