package httpapi

import (
	"errors"
	"io"
	"math"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/protocol"
	"github.com/wsstore/wsstore/wserr"
)

// opener returns a reader of the n bytes of a file from offset off (n < 0:
// up to the end).
type opener func(off, n int64) (io.ReadCloser, error)

// sendFile answers a download of a stored file of size bytes whose content
// hashes to sum, read through open. The ETag is the content hash, so a
// conditional request whose If-None-Match holds it gets 304 and no byte
// is read, and one whose If-Match does not (nor "*") 412. A single byte range (Range: bytes=a-b, a-, -n) is answered 206
// with only that range read; a range the file does not hold, 416; several
// ranges, or an If-Range that names another version, the whole file. A
// read error half-way (corrupt bytes) aborts the connection, so the client
// sees a truncated response, never wrong bytes. With turn, the bytes are
// read in a transfer's turn (Handler.turn), taken once the answer is
// known to carry them: a HEAD, a 304 or a 416 reads nothing and waits
// for none. Without it the caller holds one.
func (h *Handler) sendFile(w http.ResponseWriter, r *http.Request, name string, sum cas.Hash, size int64, open opener, turn bool) {
	etag := `"` + sum.String() + `"`
	if list := strings.Join(r.Header.Values("If-Match"), ","); list != "" && !etagMatch(list, etag, false) {
		// Another version than the client's (RFC 9110, 13.1.1): none of
		// this one's bytes, so a resumed range is never stitched to
		// another version's.
		writeError(w, wserr.New(protocol.CodePreconditionFailed, "download", name, "If-Match names no version this file is at now (its ETag is %s): download it whole again", etag))
		return
	}
	hd := w.Header()
	hd.Set("ETag", etag)
	hd.Set("X-Content-Hash", sum.String())
	hd.Set("Accept-Ranges", "bytes")
	if etagMatch(r.Header.Get("If-None-Match"), etag, true) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	off, n, status := int64(0), size, http.StatusOK
	if spec := r.Header.Get("Range"); spec != "" && r.Method == http.MethodGet && ifRange(r.Header.Get("If-Range"), etag) {
		a, b, ok, satisfiable := parseRange(spec, size)
		if ok && !satisfiable {
			hd.Set("Content-Range", "bytes */"+strconv.FormatInt(size, 10))
			writeError(w, wserr.New(protocol.CodeRangeNotSatisfiable, "download", name, "range %q is outside the file's %d bytes", spec, size))
			return
		}
		if ok {
			off, n, status = a, b-a+1, http.StatusPartialContent
			hd.Set("Content-Range", "bytes "+strconv.FormatInt(a, 10)+"-"+strconv.FormatInt(b, 10)+"/"+strconv.FormatInt(size, 10))
		}
	}
	ct := mime.TypeByExtension(path.Ext(name))
	if ct == "" {
		ct = "application/octet-stream"
	}
	if r.Method == http.MethodHead {
		hd.Set("Content-Type", ct)
		hd.Set("Content-Length", strconv.FormatInt(n, 10))
		w.WriteHeader(status)
		return
	}
	fail := func(err error) {
		for _, k := range []string{"Content-Range", "ETag", "X-Content-Hash", "Accept-Ranges"} {
			hd.Del(k) // they describe a file the error body is not
		}
		writeError(w, err)
	}
	if turn {
		release, err := h.waitTurn(r)
		if wserr.Is(err, wserr.Busy) {
			hd.Set("Retry-After", "1")
			fail(err)
		}
		if err != nil {
			return
		}
		defer release()
	}
	var rc io.ReadCloser
	err := h.retry(r.Context(), func() (err error) {
		rc, err = open(off, n)
		return err
	})
	if err != nil {
		fail(err)
		return
	}
	defer rc.Close()
	hd.Set("Content-Type", ct)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Content-Length", strconv.FormatInt(n, 10))
	w.WriteHeader(status)
	if _, err := io.Copy(h.progressWriter(w), io.LimitReader(rc, n)); err != nil {
		// The status is out: the connection is cut short of the
		// Content-Length, and the log line says why.
		if lw, ok := w.(*logWriter); ok {
			lw.aborted = err
		}
		panic(http.ErrAbortHandler)
	}
}

// etagMatch reports whether the header list of entity tags names etag
// (or is "*"): weakly, a weak tag by its opaque part (If-None-Match), or
// strongly, a weak tag matching nothing (If-Match).
func etagMatch(list, etag string, weak bool) bool {
	if list == "" {
		return false
	}
	for _, t := range strings.Split(list, ",") {
		t = strings.TrimSpace(t)
		if weak {
			t = strings.TrimPrefix(t, "W/")
		}
		if t == "*" || t == etag {
			return true
		}
	}
	return false
}

// ifRange reports whether a Range request applies: no If-Range, or one
// naming the current version by its ETag (a date never matches: the
// store keeps no modification times for downloads).
func ifRange(v, etag string) bool {
	return v == "" || strings.TrimSpace(v) == etag
}

// parseRange parses a Range header against a file of size bytes. ok is
// false for a header this server ignores (not bytes, not one range, or
// malformed), which gets the whole file; otherwise satisfiable says
// whether the file holds the range, and [a, b] are its first and last
// bytes.
// rangeNumber reads a byte position of a Range: digits only, and one past
// what int64 holds is as large as any file (RFC 9110 takes a last
// position past the end as the end).
func rangeNumber(s string) (int64, bool) {
	if s == "" || strings.Trim(s, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if errors.Is(err, strconv.ErrRange) {
		return math.MaxInt64, true
	}
	return n, err == nil
}

func parseRange(spec string, size int64) (a, b int64, ok, satisfiable bool) {
	unit, set, found := strings.Cut(spec, "=")
	if !found || strings.TrimSpace(unit) != "bytes" || strings.Contains(set, ",") {
		return 0, 0, false, false
	}
	first, last, found := strings.Cut(strings.TrimSpace(set), "-")
	if !found {
		return 0, 0, false, false
	}
	first, last = strings.TrimSpace(first), strings.TrimSpace(last)
	if first == "" {
		// A suffix: the last n bytes.
		n, ok := rangeNumber(last)
		if !ok {
			return 0, 0, false, false
		}
		if n == 0 || size == 0 {
			return 0, 0, true, false
		}
		return max(0, size-n), size - 1, true, true
	}
	a, ok = rangeNumber(first)
	if !ok {
		return 0, 0, false, false
	}
	b = size - 1
	if last != "" {
		if b, ok = rangeNumber(last); !ok || b < a {
			return 0, 0, false, false
		}
		b = min(b, size-1)
	}
	if a >= size {
		return 0, 0, true, false
	}
	return a, b, true, true
}
