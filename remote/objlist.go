package remote

import (
	"bufio"
	"errors"
	"io"

	"github.com/wsstore/wsstore/cas"
)

// objectRecord is the size of one object in an ObjectList and in a
// segment's object section: its kind (0 blob, 1 chunk), then its hash.
const objectRecord = 1 + len(cas.Hash{})

// ObjectList is a change of a device's object set, the objects it drops,
// then those it adds, kept in a temporary file rather than in memory: a
// base lists every object the store records. Build it with Drop and Add
// (every Drop before the first Add), read it with Each, and Close it.
type ObjectList struct {
	sp      *Spool
	dropped int64
	added   int64
	// mark is the place (remote_dropped.id) of the last drop recorded
	// when ObjectDelta took the list: the drops it accounts for.
	mark int64
}

// NewObjectList returns an empty list in a new temporary file.
func NewObjectList() (*ObjectList, error) {
	sp, err := newSpool("object list", "wsstore-objects-*")
	if err != nil {
		return nil, err
	}
	return &ObjectList{sp: sp}, nil
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
	rec := record(kind, h)
	_, err := l.sp.Write(rec[:])
	return err
}

// record is an object as an ObjectList, a segment's object section and
// reclaim's scratch set hold it.
func record(kind cas.Kind, h cas.Hash) [objectRecord]byte {
	var rec [objectRecord]byte
	rec[0] = byte(kind)
	copy(rec[1:], h[:])
	return rec
}

// Dropped and Added count the list's objects.
func (l *ObjectList) Dropped() int64 { return l.dropped }
func (l *ObjectList) Added() int64   { return l.added }

// Empty reports whether the list changes nothing.
func (l *ObjectList) Empty() bool { return l == nil || l.dropped+l.added == 0 }

// spool returns the list's bytes, as in a segment; nil for a nil list.
func (l *ObjectList) spool() *Spool {
	if l == nil {
		return nil
	}
	return l.sp
}

// Each calls fn with every object of the list, the dropped ones first.
func (l *ObjectList) Each(fn func(dropped bool, kind cas.Kind, h cas.Hash) error) error {
	if l == nil {
		return nil
	}
	r, err := l.sp.Reader()
	if err != nil {
		return err
	}
	return eachRecord(bufio.NewReaderSize(r, 64<<10), l.dropped, l.added, fn)
}

// Close removes the list's file.
func (l *ObjectList) Close() error {
	if l == nil {
		return nil
	}
	return l.sp.Close()
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
