package httpapi

import (
	"io"
	"net/http"
	"time"
)

// answerWindow gives w's answer the write window (WriteIOTimeout) from
// when it starts to go out, not from when its request arrived, which is
// when the server set its write deadline (http.Server.WriteTimeout): the
// deadline is lifted while the request is worked on (a collection, a wait
// for a busy store or a turn, an upload read), however long that takes,
// and set again as the status is written. A streamed body then moves it
// as its bytes go out (progressWriter), so a client that stops reading
// is still cut after the window. A negative window leaves the deadline as
// the server set it; without a deadline to set (a test recorder) nothing
// changes.
func (h *Handler) answerWindow(w *logWriter) {
	if h.opts.WriteIOTimeout < 0 {
		return
	}
	rc := http.NewResponseController(w.ResponseWriter)
	if rc.SetWriteDeadline(time.Time{}) != nil {
		return
	}
	w.answering = func() { _ = rc.SetWriteDeadline(time.Now().Add(h.opts.WriteIOTimeout)) }
}

// progressReader extends the connection's read deadline by ReadIOTimeout
// as the body flows, so the server's read timeout cuts a stalled upload
// but not a large one; the answer, a stalled body's error too, has its
// own write window once it starts (answerWindow). A negative window
// leaves the read deadline as the server set it (none, for `wsctl serve
// --read-timeout 0`). Without a deadline to extend (a test recorder) it
// reads as r does.
func (h *Handler) progressReader(w http.ResponseWriter, r io.Reader) io.Reader {
	if h.opts.ReadIOTimeout < 0 {
		return r
	}
	rc := http.NewResponseController(w)
	return &deadlineReader{r: r, every: h.opts.ReadIOTimeout, extend: rc.SetReadDeadline}
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
