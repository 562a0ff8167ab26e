package httpapi

import (
	"io"
	"net/http"
	"time"
)

// progressReader extends the connection's read deadline by ReadIOTimeout
// as the body flows, so the server's read timeout cuts a stalled upload
// but not a large one. It extends the write deadline too, which the
// server set when the request arrived, to WriteIOTimeout past the read
// deadline: the answer, a stalled body's error too, is written once the
// body is read or given up, however long that took. A negative window
// leaves its direction's deadline as the server set it (none, for `wsctl
// serve` with that timeout 0): with no read window the write deadline
// moves WriteIOTimeout past the latest bytes, so a long upload is still
// answered. Without a deadline to extend (a test recorder) it reads as r
// does.
func (h *Handler) progressReader(w http.ResponseWriter, r io.Reader) io.Reader {
	read, write := h.opts.ReadIOTimeout, h.opts.WriteIOTimeout
	if read < 0 && write < 0 {
		return r
	}
	rc := http.NewResponseController(w)
	every := read
	if read < 0 {
		every = write
	}
	return &deadlineReader{r: r, every: every, extend: func(t time.Time) error {
		if read < 0 {
			return rc.SetWriteDeadline(t) // t is write past now
		}
		if err := rc.SetReadDeadline(t); err != nil {
			return err
		}
		if write < 0 {
			return nil
		}
		return rc.SetWriteDeadline(t.Add(write))
	}}
}

// progressWriter is progressReader for a response body, by
// WriteIOTimeout.
func (h *Handler) progressWriter(w http.ResponseWriter) io.Writer {
	if h.opts.WriteIOTimeout < 0 {
		return w
	}
	rc := http.NewResponseController(w)
	return &deadlineWriter{w: w, extend: func(t time.Time) error { return rc.SetWriteDeadline(t) }, every: h.opts.WriteIOTimeout}
}

type deadlineReader struct {
	r      io.Reader
	extend func(time.Time) error
	every  time.Duration
	last   time.Time
	off    bool // the writer has no deadline to extend
}

func (d *deadlineReader) Read(b []byte) (int, error) {
	if !d.off {
		if now := time.Now(); now.Sub(d.last) > d.every/4 {
			d.last = now
			d.off = d.extend(now.Add(d.every)) != nil
		}
	}
	return d.r.Read(b)
}

type deadlineWriter struct {
	w      io.Writer
	extend func(time.Time) error
	every  time.Duration
	last   time.Time
	off    bool
}

func (d *deadlineWriter) Write(b []byte) (int, error) {
	if !d.off {
		if now := time.Now(); now.Sub(d.last) > d.every/4 {
			d.last = now
			d.off = d.extend(now.Add(d.every)) != nil
		}
	}
	return d.w.Write(b)
}
