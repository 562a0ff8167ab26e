package httpapi

import (
	"io"
	"os"
)

// spool keeps a copy of a request body on disk as it is read, so that a
// store that was busy part-way through it can be sent the body again from
// its first byte: the body itself can be read only once. Memory stays
// bounded whatever the body's size; the file is removed on Close.
type spool struct {
	f    *os.File
	body io.Reader
	n    int64 // bytes of body read, and held in f
}

// newSpool returns a spool of body in a temporary file in dir (""; the
// system's temporary directory).
func newSpool(dir string, body io.Reader) (*spool, error) {
	f, err := os.CreateTemp(dir, "wsstore-upload-*")
	if err != nil {
		return nil, err
	}
	// Unlinked at once where the system allows, so a crash leaves nothing.
	_ = os.Remove(f.Name())
	return &spool{f: f, body: body}, nil
}

// reader returns a reader of the body from its first byte: what was read
// already comes from the file, the rest from the body, copied to the file
// as it passes. One reader at a time.
func (s *spool) reader() io.Reader { return &spoolReader{s: s} }

// Close removes the file.
func (s *spool) Close() error {
	name := s.f.Name()
	err := s.f.Close()
	_ = os.Remove(name)
	return err
}

type spoolReader struct {
	s   *spool
	off int64
}

func (r *spoolReader) Read(p []byte) (int, error) {
	s := r.s
	if r.off < s.n {
		n, err := s.f.ReadAt(p[:min(int64(len(p)), s.n-r.off)], r.off)
		r.off += int64(n)
		if err == io.EOF {
			err = nil
		}
		return n, err
	}
	n, err := s.body.Read(p)
	if n > 0 {
		if _, werr := s.f.WriteAt(p[:n], s.n); werr != nil {
			return 0, werr
		}
		s.n += int64(n)
		r.off += int64(n)
	}
	return n, err
}
