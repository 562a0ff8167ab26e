package httpapi

import (
	"fmt"
	"io"
	"os"

	"github.com/wsstore/wsstore/wserr"
)

// spool keeps a copy of a request body as it is read, so that a store
// that was busy part-way through it can be sent the body again from its
// first byte: the body itself can be read only once. Nothing is read
// before the store asks for it, so a change the store refuses before its
// content (a stale If-Match, a bad path) reads none of the body. The first
// mem bytes are held in memory; past them the body goes to a temporary
// file, made when it is first needed, so memory stays bounded whatever
// the body's size; the file is removed on Close.
type spool struct {
	dir  string
	body io.Reader
	buf  []byte   // the body's first bytes, up to mem
	mem  int      // the most buf holds
	f    *os.File // the bytes after buf, once there are any
	n    int64    // bytes of body read: buf, then f
	err  error    // the copy could not keep what the body gave next
}

// newSpool returns a spool of body whose bytes past mem go to a temporary
// file in dir ("": the system's temporary directory).
func newSpool(dir string, body io.Reader, mem int) *spool {
	return &spool{dir: dir, body: body, mem: mem}
}

// reader returns a reader of the body from its first byte: what was read
// already comes from memory or the file, the rest from the body, kept as
// it passes. One reader at a time.
func (s *spool) reader() io.Reader { return &spoolReader{s: s} }

// Close removes the file, if there is one.
func (s *spool) Close() error {
	if s.f == nil {
		return nil
	}
	name := s.f.Name()
	err := s.f.Close()
	_ = os.Remove(name)
	return err
}

// keep appends p, the next bytes of the body, to the copy: to buf while
// it has room, then to the file. When it fails, the copy is as it was,
// and p is lost with it: every reader fails there from then on.
func (s *spool) keep(p []byte) error {
	kept, held := s.n, len(s.buf) // bytes kept before p, and of them in buf
	if n := min(len(p), s.mem-len(s.buf)); n > 0 {
		s.buf = append(s.buf, p[:n]...)
		p, kept = p[n:], kept+int64(n)
	}
	if len(p) == 0 {
		return nil
	}
	if err := s.write(p, kept-int64(s.mem)); err != nil {
		s.buf, s.err = s.buf[:held], err
		return err
	}
	return nil
}

// write writes p at off of the file, made on the first write.
func (s *spool) write(p []byte, off int64) error {
	if s.f == nil {
		f, err := os.CreateTemp(s.dir, "wsstore-upload-*")
		if err != nil {
			return spoolError(err)
		}
		// Unlinked at once where the system allows, so a crash leaves
		// nothing.
		_ = os.Remove(f.Name())
		s.f = f
	}
	if _, err := s.f.WriteAt(p, off); err != nil {
		return spoolError(err)
	}
	return nil
}

// spoolError codes a failure to keep the body's copy: a full disk and a
// read-only file system are the host's state, as the store's own writes
// report them; anything else is the server's.
func spoolError(err error) error {
	return wserr.FromFS("upload", "", fmt.Errorf("spool the body: %w", err))
}

type spoolReader struct {
	s   *spool
	off int64
}

func (r *spoolReader) Read(p []byte) (int, error) {
	s := r.s
	if r.off < s.n {
		var n int
		var err error
		if r.off < int64(len(s.buf)) {
			n = copy(p, s.buf[r.off:])
		} else {
			n, err = s.f.ReadAt(p[:min(int64(len(p)), s.n-r.off)], r.off-int64(len(s.buf)))
			if err == io.EOF {
				err = nil
			}
		}
		r.off += int64(n)
		return n, err
	}
	if s.err != nil {
		return 0, s.err
	}
	n, err := s.body.Read(p)
	if n > 0 {
		if kerr := s.keep(p[:n]); kerr != nil {
			return 0, kerr
		}
		s.n += int64(n)
		r.off += int64(n)
	}
	return n, err
}
