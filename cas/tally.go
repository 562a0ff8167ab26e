package cas

import (
	"context"
	"fmt"
	"io"

	"github.com/wsstore/wsstore/wserr"
)

// A Tally counts the bytes read through it from R and, once Hash is set,
// hashes them. It keeps R's first error (io.EOF too) and returns it from
// then on, reading R no more. It serves a write the store cap refused
// room for: content the store holds already adds no content bytes, but
// only its address tells, once it is read (CapRefused, Finish).
type Tally struct {
	R    io.Reader
	N    int64
	Hash *Hasher // nil: not hashed
	err  error
}

func (t *Tally) Read(b []byte) (int, error) {
	if t.err != nil {
		return 0, t.err
	}
	n, err := t.R.Read(b)
	t.N += int64(n)
	if t.Hash != nil {
		t.Hash.Write(b[:n])
	}
	t.err = err
	return n, err
}

// CapRefused reports whether err, the failure of a Put that read t, is
// a store cap's refusal (workspace.size_limit_exceeded from a reader
// between t and the Put) rather than a failure of R, which t would hold.
func (t *Tally) CapRefused(err error) bool {
	return (t.err == nil || t.err == io.EOF) && wserr.Is(err, wserr.SizeLimitExceeded)
}

// Finish reads what is left of R, hashing it with what was read already
// (Hash set before the first read, or nothing read: Finish then hashes
// with a Hasher of its own), and returns the content's address and size.
// It stores nothing and holds 64 KiB. Its errors are R's, and
// store.canceled once ctx ends.
func (t *Tally) Finish(ctx context.Context, op, path string) (Hash, int64, error) {
	if t.Hash == nil {
		if t.N > 0 {
			return Hash{}, 0, fmt.Errorf("%s %s: the content was read before it was hashed", op, path)
		}
		t.Hash = NewHasher()
		defer func() { t.Hash.Release(); t.Hash = nil }()
	}
	buf := make([]byte, 64<<10)
	for {
		if err := ctx.Err(); err != nil {
			return Hash{}, 0, wserr.Wrap(wserr.Canceled, op, path, err)
		}
		_, err := t.Read(buf)
		if err == io.EOF {
			return t.Hash.Sum(), t.N, nil
		}
		if err != nil {
			return Hash{}, 0, fmt.Errorf("%s %s: read: %w", op, path, err)
		}
	}
}
