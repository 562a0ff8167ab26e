package remote

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/wsstore/wsstore/internal/tempfile"
	"github.com/wsstore/wsstore/wserr"
)

// Spool is bytes kept in a temporary file: written once, then read back
// as often as needed. A segment's metadata archive and its object section
// go through one on their way to and from the object store, so that no
// segment is held in memory. Close it when done.
type Spool struct {
	op   string
	f    *os.File
	done func() error // closes and removes f
	w    *bufio.Writer
	n    int64
	off  int64 // where what it reads back starts: a fetched segment's archive
}

// NewSpool returns an empty Spool in a new temporary file.
func NewSpool() (*Spool, error) { return newSpool("spool", "wsstore-spool-*") }

func newSpool(op, pattern string) (*Spool, error) {
	f, done, err := tempfile.Create(pattern)
	if err != nil {
		return nil, tempError(op, err)
	}
	return &Spool{op: op, f: f, done: done, w: bufio.NewWriterSize(f, 64<<10)}, nil
}

// Write appends p.
func (s *Spool) Write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	s.n += int64(n)
	if err != nil {
		return n, tempError(s.op, err)
	}
	return n, nil
}

// Size is how many bytes were written (from its start, for a Spool that
// starts part way into its file); 0 for a nil Spool.
func (s *Spool) Size() int64 {
	if s == nil {
		return 0
	}
	return s.n - s.off
}

// Reader returns what was written so far, from its start; a nil Spool
// reads as empty.
func (s *Spool) Reader() (io.Reader, error) {
	if s == nil {
		return eofReader{}, nil
	}
	sr, err := s.section()
	if err != nil {
		return nil, err
	}
	return spoolReader{sr, s.op}, nil
}

// section returns what was written so far, for an upload that reads
// and seeks it.
func (s *Spool) section() (*io.SectionReader, error) {
	if err := s.w.Flush(); err != nil {
		return nil, tempError(s.op, err)
	}
	return io.NewSectionReader(s.f, s.off, s.n-s.off), nil
}

// Close removes the Spool's file; a nil Spool is closed already.
func (s *Spool) Close() error {
	if s == nil || s.f == nil {
		return nil
	}
	err := s.done()
	s.f = nil
	return err
}

// spoolReader reads a Spool back, its failures coded as its writes'.
type spoolReader struct {
	r  *io.SectionReader
	op string
}

func (r spoolReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && err != io.EOF {
		err = tempError(r.op, err)
	}
	return n, err
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

// tempError codes a failure to keep a temporary file (in os.TempDir: the
// TMPDIR environment variable on Unix) as wserr.FromFS does.
func tempError(op string, err error) error {
	var coded *wserr.Error
	if errors.As(err, &coded) {
		return err
	}
	return wserr.FromFS(op, os.TempDir(), fmt.Errorf("temporary file: %w", err))
}
