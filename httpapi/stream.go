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
// body is read or given up, however long that took. Without a deadline
// to extend (a host's own server without timeouts, a test recorder) it
// reads as r does.
func (h *Handler) progressReader(w http.ResponseWriter, r io.Reader) io.Reader {
	if h.opts.ReadIOTimeout < 0 {
		return r
	}
	rc := http.NewResponseController(w)
	answer := max(h.opts.WriteIOTimeout, 0)
	return &deadlineReader{r: r, every: h.opts.ReadIOTimeout, extend: func(t time.Time) error {
		if err := rc.SetReadDeadline(t); err != nil {
			return err
		}
		return rc.SetWriteDeadline(t.Add(answer))
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
