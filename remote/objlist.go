package remote

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/wserr"
)

// objectRecord is the size of one object in an ObjectList and in a
// segment's object section: its kind (0 blob, 1 chunk), then its hash.
const objectRecord = 1 + len(cas.Hash{})

// ObjectList is a change of a device's object set, the objects it drops,
// then those it adds, kept in a temporary file rather than in memory: a
// base lists every object the store records. Build it with Drop and Add
// (every Drop before the first Add), read it with Each, and Close it.
type ObjectList struct {
	f       *os.File
	done    func() error // closes and removes f
	w       *bufio.Writer
	dropped int64
	added   int64
}

// NewObjectList returns an empty list in a new temporary file.
func NewObjectList() (*ObjectList, error) {
	f, done, err := tempFile("wsstore-objects-*")
	if err != nil {
		return nil, tempError("object list", err)
	}
	return &ObjectList{f: f, done: done, w: bufio.NewWriterSize(f, 64<<10)}, nil
}

// tempError codes a failure to keep a temporary file (in os.TempDir: the
// TMPDIR environment variable on Unix) as wserr.FromFS does.
func tempError(op string, err error) error {
	return wserr.FromFS(op, os.TempDir(), fmt.Errorf("temporary file: %w", err))
}

// tempFile creates a temporary file and returns it with the function
// that closes and removes it. Where the system allows, the file is
// unlinked at once, so that nothing is left behind by a process killed
// before it is done with it.
func tempFile(pattern string) (*os.File, func() error, error) {
	f, err := os.CreateTemp("", pattern)
	if err != nil {
		return nil, nil, err
	}
	if os.Remove(f.Name()) == nil {
		return f, f.Close, nil
	}
	return f, func() error { return errors.Join(f.Close(), os.Remove(f.Name())) }, nil
}

// Drop appends an object the set loses. It fails once Add was called.
func (l *ObjectList) Drop(kind cas.Kind, h cas.Hash) error {
	if l.added > 0 {
		return errors.New("object list: a drop after an add")
	}
	l.dropped++
	return l.write(kind, h)
}

// Add appends an object the set gains.
func (l *ObjectList) Add(kind cas.Kind, h cas.Hash) error {
	l.added++
	return l.write(kind, h)
}

func (l *ObjectList) write(kind cas.Kind, h cas.Hash) error {
	if err := l.w.WriteByte(byte(kind)); err != nil {
		return tempError("object list", err)
	}
	if _, err := l.w.Write(h[:]); err != nil {
		return tempError("object list", err)
	}
	return nil
}

// Dropped and Added count the list's objects.
func (l *ObjectList) Dropped() int64 { return l.dropped }
func (l *ObjectList) Added() int64   { return l.added }

// Empty reports whether the list changes nothing.
func (l *ObjectList) Empty() bool { return l == nil || l.dropped+l.added == 0 }

// size is the list's length in bytes, as in a segment.
func (l *ObjectList) size() int64 {
	if l == nil {
		return 0
	}
	return (l.dropped + l.added) * int64(objectRecord)
}

// reader returns the list's bytes from the start.
func (l *ObjectList) reader() (io.Reader, error) {
	if l == nil {
		return eofReader{}, nil
	}
	if err := l.w.Flush(); err != nil {
		return nil, tempError("object list", err)
	}
	if _, err := l.f.Seek(0, io.SeekStart); err != nil {
		return nil, tempError("object list", err)
	}
	return io.LimitReader(l.f, l.size()), nil
}

// Each calls fn with every object of the list, the dropped ones first.
func (l *ObjectList) Each(fn func(dropped bool, kind cas.Kind, h cas.Hash) error) error {
	r, err := l.reader()
	if err != nil {
		return err
	}
	if l == nil {
		return nil
	}
	return eachRecord(bufio.NewReaderSize(r, 64<<10), l.dropped, l.added, fn)
}

// Close removes the list's file.
func (l *ObjectList) Close() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.done()
	l.f = nil
	return err
}

// eachRecord reads dropped then added records from r and calls fn with
// each. A kind other than blob or chunk, or r ending early, is an error
// wrapping io.ErrUnexpectedEOF or errBadRecord.
func eachRecord(r io.Reader, dropped, added int64, fn func(dropped bool, kind cas.Kind, h cas.Hash) error) error {
	var rec [objectRecord]byte
	for i := range dropped + added {
		if _, err := io.ReadFull(r, rec[:]); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
		kind := cas.Kind(rec[0])
		if kind != cas.KindBlob && kind != cas.KindChunk {
			return errBadRecord
		}
		if err := fn(i < dropped, kind, cas.Hash(rec[1:])); err != nil {
			return err
		}
	}
	return nil
}

var errBadRecord = errors.New("an object record of an unknown kind")

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }
