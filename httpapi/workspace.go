package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/actors"
	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/protocol"
	"github.com/wsstore/wsstore/tokens"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// Seed 004's Workspace API. Every endpoint that changes a space names its
// actor (?actor=), and the token must allow it; the listing and the stats
// without one read across the spaces the token may reach.

// GET /workspace/files?actor=&path=&depth=&after=&limit=: the actor's
// entries below path (default the root), depth levels down (default 1), a
// page at a time (more: entries remain after the last). Without actor,
// the spaces as one tree (wsTreeFiles).
func (h *Handler) wsFiles(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	actor := q.Get("actor")
	tok, ok := h.authorize(w, r, access{actor: actor, spaces: actor == ""})
	if !ok {
		return
	}
	depth, err := intParam(q.Get("depth"), "depth", math.MaxInt)
	if err == nil && depth < 0 {
		err = badRequest("depth must not be negative")
	}
	if err == nil && actor == "" {
		h.wsTreeFiles(w, r, tok, depth)
		return
	}
	var page vfs.ListPage
	if err == nil {
		page, err = pageParams(r)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	release, ok := h.listTurn(w, r, page.Limit)
	if !ok {
		return
	}
	defer release()
	var ls []vfs.Listed
	var more bool
	err = h.retry(r.Context(), func() (err error) {
		ls, more, err = h.b.Actors.ListPage(r.Context(), actor, q.Get("path"), depth, page)
		return err
	})
	if err != nil {
		writeError(w, err)
		return
	}
	if ls == nil {
		ls = []vfs.Listed{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"actor": actor, "entries": ls, "more": more})
}

// wsTreeFiles answers GET /workspace/files without actor: the spaces tok
// may reach as one tree, seed 004's workspace/ directory, whose root holds
// a directory per actor; path and the entries' paths start with the actor
// (actors.Spaces.WorkspacePage).
func (h *Handler) wsTreeFiles(w http.ResponseWriter, r *http.Request, tok tokens.Token, depth int) {
	q := r.URL.Query()
	limit, err := intParam(q.Get("limit"), "limit", vfs.MaxListLimit)
	var page vfs.ListPage
	if err == nil {
		if page, err = vfs.ParseListPage("", limit); err != nil {
			err = badRequest("%s", err.Error())
		}
	}
	var cursor actors.WorkspaceCursor
	if err == nil {
		if cursor, err = actors.ParseWorkspaceCursor(q.Get("after")); err != nil {
			err = badRequest("%s", err.Error())
		}
	}
	if err != nil {
		writeError(w, err)
		return
	}
	release, ok := h.listTurn(w, r, page.Limit)
	if !ok {
		return
	}
	defer release()
	var ls []actors.WorkspaceEntry
	var more bool
	err = h.retry(r.Context(), func() (err error) {
		ls, more, err = h.b.Actors.WorkspacePage(r.Context(), tok.Actors, q.Get("path"), depth, cursor, page.Limit)
		return err
	})
	if err != nil {
		writeError(w, err)
		return
	}
	if ls == nil {
		ls = []actors.WorkspaceEntry{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"entries": ls, "more": more})
}

// GET /workspace/file?actor=&path=: the file's bytes, streamed, with its
// hash as ETag; one byte range (Range:) is read alone (sendFile).
func (h *Handler) wsDownload(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	actor, p := q.Get("actor"), q.Get("path")
	if _, ok := h.authorize(w, r, access{actor: actor}); !ok {
		return
	}
	var e vfs.Entry
	err := h.retry(r.Context(), func() (err error) {
		if e, err = h.b.Actors.Stat(r.Context(), actor, p); err == nil && e.Kind != vfs.KindFile {
			// The refusal Download gives a directory (or the root).
			var rc io.ReadCloser
			if rc, _, err = h.b.Actors.Download(r.Context(), actor, p); err == nil {
				rc.Close()
				err = wserr.New(wserr.PathIsDirectory, "download", p, "is a directory")
			}
		}
		return err
	})
	if err != nil {
		writeError(w, err)
		return
	}
	ranges := h.blobRange(r, e.Hash)
	now := func() (cas.Hash, error) {
		cur, err := h.b.Actors.Stat(context.WithoutCancel(r.Context()), actor, p)
		return cur.Hash, err
	}
	h.sendFile(w, r, p, e.Hash, e.Size, func(off, n int64) (io.ReadCloser, error) {
		rc, err := ranges(off, n)
		if err != nil {
			return nil, err
		}
		return cas.GoneMeanwhile(rc, "download", p, e.Hash, now), nil
	}, true)
}

// blobRange opens ranges of the stored content sum.
func (h *Handler) blobRange(r *http.Request, sum cas.Hash) opener {
	return func(off, n int64) (io.ReadCloser, error) {
		return h.b.Blobs.GetRange(r.Context(), sum, off, n)
	}
}

// POST /workspace/upload?actor=&path=: the body (or the first file of a
// multipart form) becomes the file, streamed to the store.
func (h *Handler) wsUpload(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	actor, p := q.Get("actor"), q.Get("path")
	if _, ok := h.authorize(w, r, access{write: true, actor: actor}); !ok {
		return
	}
	opt, err := conditions(r)
	if err != nil {
		writeChangeError(w, err)
		return
	}
	multipart := false
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt == "multipart/form-data" {
		multipart = true
	}
	var body io.Reader = r.Body
	if limit := h.opts.MaxUploadBytes; limit > 0 && !multipart && r.ContentLength > limit {
		// Refused as it is announced, before a byte of it is read or
		// stored.
		writeChangeError(w, tooLarge(p, limit))
		return
	}
	release, ok := h.turn(w, r)
	if !ok {
		return
	}
	defer release()
	if limit := h.opts.MaxUploadBytes; limit > 0 {
		if multipart {
			// The limit is the file's: the form around it may add up
			// to multipartSlack (none past the largest limit there is).
			limit += min(multipartSlack, math.MaxInt64-limit)
		}
		body = http.MaxBytesReader(w, r.Body, limit)
	}
	body = h.progressReader(w, clientBody{body, "read the upload"})
	if !multipart && r.ContentLength > 0 {
		// Under a store cap the upload takes its room before it is read.
		opt.Size = r.ContentLength
	}
	if multipart {
		part, err := firstFile(r, body)
		if err != nil {
			writeError(w, h.overLimit(p, err))
			return
		}
		if h.opts.MaxUploadBytes > 0 {
			part = &limitedPart{r: part, left: h.opts.MaxUploadBytes, limit: h.opts.MaxUploadBytes}
		}
		body = clientBody{part, "multipart body"}
	}
	// A body cut short also ends the request's context, which the upload
	// may see before it reads the cut: the body's error is what the client
	// is answered, looked for in what is left of a short body.
	read := &bodyError{r: body}
	c, err := h.upload(r, actor, p, read, opt)
	if err != nil {
		if read.err == nil && r.Context().Err() != nil {
			io.Copy(io.Discard, io.LimitReader(read, cutTail))
		}
		if read.err != nil {
			err = read.err
		}
		writeChangeError(w, h.overLimit(p, err))
		return
	}
	writeJSON(w, http.StatusOK, c)
}

// cutTail is how much of an upload's body is read after its request's
// context ended, to tell a body cut short (answered 400) from a client
// that went away: a form's closing boundary and little more.
const cutTail = 64 << 10

func tooLarge(path string, limit int64) error {
	return wserr.New(wserr.SizeLimitExceeded, "upload", path, "the upload is larger than this server takes (%d bytes)", limit)
}

// overLimit is err, or, when err is an upload's body past a bound, the
// refusal for its size: of the file (Options.MaxUploadBytes), or of a
// multipart form, whose bound adds multipartSlack of form around it.
func (h *Handler) overLimit(path string, err error) error {
	var mbe *http.MaxBytesError
	if !errors.As(err, &mbe) {
		return err
	}
	if limit := h.opts.MaxUploadBytes; mbe.Limit != limit {
		return wserr.New(wserr.SizeLimitExceeded, "upload", path, "the multipart form is larger than this server takes (a file of at most %d bytes, with at most %d bytes of form around it)", limit, multipartSlack)
	}
	return tooLarge(path, mbe.Limit)
}

// multipartSlack is what a multipart upload's form may take beside its
// file under Options.MaxUploadBytes: boundaries, part headers and small
// fields.
const multipartSlack = 64 << 10

// limitedPart reads a multipart upload's file, failing as
// http.MaxBytesReader does once it holds more than limit bytes.
type limitedPart struct {
	r           io.Reader
	left, limit int64 // left: bytes it may still read
}

func (p *limitedPart) Read(b []byte) (int, error) {
	if p.left < int64(len(b)) {
		b = b[:p.left+1] // a byte past the limit tells a file over it
	}
	n, err := p.r.Read(b)
	if int64(n) > p.left {
		n, p.left = int(p.left), 0
		return n, &http.MaxBytesError{Limit: p.limit}
	}
	p.left -= int64(n)
	return n, err
}

// firstFile returns the first file part of r's multipart body, read from
// body. At the part's end the reader reads the rest of the form to its
// closing boundary, so that a body cut short after the file fails the
// upload, as a raw body cut short does.
func firstFile(r *http.Request, body io.Reader) (io.Reader, error) {
	r.Body = io.NopCloser(body)
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, badRequest("multipart body: %v", err)
	}
	for {
		part, err := mr.NextPart()
		var mbe *http.MaxBytesError
		var coded *wserr.Error
		switch {
		case err == io.EOF:
			return nil, badRequest("the multipart body holds no file part")
		case errors.As(err, &mbe), errors.As(err, &coded):
			// Past the form's bound, or the body's own error (cut
			// short, too slow): as for the file's bytes.
			return nil, err
		case errors.Is(err, io.EOF):
			return nil, badRequest("the multipart body ends before its closing boundary, and before any file part: it was cut short")
		case err != nil:
			return nil, badRequest("multipart body: %v", err)
		}
		if part.FileName() != "" || part.FormName() == "file" {
			return &wholeForm{part: part, mr: mr}, nil
		}
	}
}

// wholeForm reads a multipart form's file part, then the parts after it
// to the form's end, returning io.EOF only once that was read whole.
type wholeForm struct {
	part io.Reader
	mr   *multipart.Reader
	end  error // once the part has ended: io.EOF, or what reading on found
}

func (f *wholeForm) Read(b []byte) (int, error) {
	if f.end != nil {
		return 0, f.end
	}
	n, err := f.part.Read(b)
	if err != io.EOF {
		return n, err
	}
	for {
		// NextPart skips what a part holds; the parts after the file
		// are bounded by the body's limit (multipartSlack).
		if _, err := f.mr.NextPart(); err != nil {
			f.end = err
			return n, err
		}
	}
}

// replayable is the largest upload held in memory so that it can be sent
// to the store again after a busy failure; a larger one is spooled to a
// temporary file as it streams (spool).
const replayable = 1 << 20

// upload stores body as actor's file p, retrying a busy store until the
// busy deadline.
func (h *Handler) upload(r *http.Request, actor, p string, body io.Reader, opt actors.ChangeOptions) (actors.Change, error) {
	var c actors.Change
	err := h.replaying(r, body, func(src io.Reader) (err error) {
		c, err = h.b.Actors.UploadWith(r.Context(), actor, p, src, opt)
		return err
	})
	return c, err
}

// replaying calls fn with body, and again with body from its first byte
// each time fn fails with a busy store, until the busy deadline (retry).
// The body is read only as fn reads it: up to replayable bytes of it are
// kept in memory, the rest in a temporary file in Options.SpoolDir
// (spool), so memory stays bounded. fn must commit nothing when it fails
// busy.
func (h *Handler) replaying(r *http.Request, body io.Reader, fn func(io.Reader) error) error {
	sp := newSpool(h.opts.SpoolDir, body, replayable)
	defer sp.Close()
	return h.retry(r.Context(), func() error { return fn(sp.reader()) })
}

// DELETE /workspace/file?actor=&path=: removes the file, or the directory
// and everything below it.
func (h *Handler) wsDelete(w http.ResponseWriter, r *http.Request) {
	h.actorChange(w, r, func(ctx context.Context, actor string, q url.Values) (actors.Change, error) {
		opt, err := conditions(r)
		if err != nil {
			return actors.Change{}, err
		}
		return h.b.Actors.DeleteWith(ctx, actor, q.Get("path"), opt)
	})
}

// conditions reads a write's conditional headers (RFC 9110, 13.1) into
// the guard of the change: If-Match with the file's ETag (its content
// hash, quoted) or "*" (a file must be there), If-None-Match "*" (nothing
// may be there). An entity tag that names no content of this store, or a
// weak one, matches nothing. If-Match with more than one tag, and
// If-None-Match with a tag, are refused (400), as the header repeated is:
// its lines make one list.
func conditions(r *http.Request) (actors.ChangeOptions, error) {
	var opt actors.ChangeOptions
	if len(r.Header.Values("If-Match")) > 1 {
		return opt, badRequest("If-Match takes one entity tag (the file's ETag) or *, on one line")
	}
	if len(r.Header.Values("If-None-Match")) > 1 {
		return opt, badRequest("If-None-Match on a write takes * alone, on one line")
	}
	if v := strings.TrimSpace(r.Header.Get("If-Match")); v != "" {
		switch {
		case v == "*":
			opt.MustExist = true
		case strings.Contains(v, ","):
			return opt, badRequest("If-Match takes one entity tag (the file's ETag) or *")
		default:
			// Compared strongly, character by character (RFC 9110,
			// 8.8.3.2): only the ETag a download gives matches, not
			// the hash in capitals or with more quotes.
			h, err := cas.ParseHash(strings.TrimSuffix(strings.TrimPrefix(v, `"`), `"`))
			if err != nil || h.IsZero() || v != `"`+h.String()+`"` {
				return opt, errNeverMatches
			}
			opt.ExpectedHash = h
		}
	}
	if v := strings.TrimSpace(r.Header.Get("If-None-Match")); v != "" {
		if v != "*" {
			return opt, badRequest("If-None-Match on a write takes * alone")
		}
		opt.MustNotExist = true
	}
	return opt, nil
}

// errNeverMatches answers an If-Match entity tag that no file can have.
var errNeverMatches = wserr.New(wserr.WriteStaleFile, "http", "", "If-Match names no content of this store (an ETag is a file's quoted content hash; a weak one never matches)")

// writeChangeError answers a failed change of a file: 412 Precondition
// Failed when its conditional headers refused it (the only way a
// /workspace/ change is stale), else as writeError.
func writeChangeError(w http.ResponseWriter, err error) {
	if wserr.Is(err, wserr.WriteStaleFile) {
		writeJSON(w, http.StatusPreconditionFailed, errorBody{Error: protocol.ErrorBody{Code: wserr.CodeOf(err), Message: wserr.MessageOf(err)}})
		return
	}
	writeError(w, err)
}

// GET /workspace/stats?actor=: the actor's files, bytes and versions.
// Without actor, a page of every actor's stats the token may reach
// (wsStatsPage).
func (h *Handler) wsStats(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	actor := q.Get("actor")
	tok, ok := h.authorize(w, r, access{actor: actor, spaces: actor == ""})
	if !ok {
		return
	}
	if actor == "" {
		h.wsStatsPage(w, r, tok)
		return
	}
	if q.Has("after") || q.Has("limit") {
		writeError(w, badRequest("after= and limit= page the stats of every actor: leave them out with actor="))
		return
	}
	var st actors.Stats
	err := h.retry(r.Context(), func() (err error) {
		st, err = h.b.Actors.Stats(r.Context(), actor)
		return err
	})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// wsStatsPage answers GET /workspace/stats?after=&limit= without actor:
// the stats of the actors with a space that tok may reach, by name, a
// page at a time (actors.Spaces.StatsPage).
func (h *Handler) wsStatsPage(w http.ResponseWriter, r *http.Request, tok tokens.Token) {
	q := r.URL.Query()
	limit, err := intParam(q.Get("limit"), "limit", actors.MaxStatsLimit)
	if err == nil && (limit < 0 || limit > actors.MaxStatsLimit) {
		err = badRequest("limit must be in 0..%d (0: %d), not %d", actors.MaxStatsLimit, actors.DefaultStatsLimit, limit)
	}
	if err == nil {
		if cerr := actors.CheckActorCursor(q.Get("after")); cerr != nil {
			err = badRequest("%s", cerr.Error())
		}
	}
	if err != nil {
		writeError(w, err)
		return
	}
	var st []actors.Stats
	var more bool
	err = h.retry(r.Context(), func() (err error) {
		st, more, err = h.b.Actors.StatsPage(r.Context(), tok.Actors, q.Get("after"), limit)
		return err
	})
	if err != nil {
		writeError(w, err)
		return
	}
	if st == nil {
		st = []actors.Stats{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"stats": st, "more": more})
}

// POST /workspace/gc?actor=&keepVersions=: prunes old versions (of one
// actor, or of all: then the token must not be limited to actors) and,
// for a token not limited to actors, collects the store: a token limited
// to an actor prunes only, since the store's collection reaches every
// actor's content and costs the whole store.
func (h *Handler) wsGC(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	actor := q.Get("actor")
	tok, ok := h.authorize(w, r, access{write: true, actor: actor, store: actor == ""})
	if !ok {
		return
	}
	keep, err := intParam(q.Get("keepVersions"), "keepVersions", math.MaxInt)
	if err == nil {
		err = unguarded(r)
	}
	if err == nil && q.Has("actor") && actor == "" {
		// actor= given empty is a mistake, not every actor: that is
		// actor= left out.
		err = wserr.New(wserr.InvalidActor, "actor gc", "", "actor name is empty: name an actor, or leave actor= out to prune every actor's versions")
	}
	if err != nil {
		writeError(w, err)
		return
	}
	// What an attempt that failed busy pruned stays pruned: the answer
	// counts it with what the attempt after it pruned.
	var pruned actors.GCReport
	count := func(p actors.GCReport) {
		pruned.Actors += p.Actors
		pruned.Pruned += p.Pruned
	}
	if !tok.AllActors() {
		err = h.retry(r.Context(), func() error {
			p, err := h.b.Actors.GC(r.Context(), actors.GCOptions{Actor: actor, KeepVersions: keep})
			count(p)
			return err
		})
		answer := map[string]any{"pruned": pruned}
		switch {
		case err == nil:
			writeJSON(w, http.StatusOK, answer)
		case pruned.Actors > 0:
			writeErrorPartial(w, err, answer) // the pages pruned stay pruned
		default:
			writeError(w, err)
		}
		return
	}
	// The collection's report is the last attempt's, with what the
	// attempts before it freed.
	var rep wsstore.GCReport
	var freed wsstore.ObjectCounts
	var freedBytes int64
	err = h.retry(r.Context(), func() error {
		p, gc, err := h.b.GC.ActorGC(r.Context(), actors.GCOptions{Actor: actor, KeepVersions: keep}, wsstore.GCOptions{})
		count(p)
		rep = gc
		freed.Blobs += gc.Freed.Blobs
		freed.Chunks += gc.Freed.Chunks
		freed.Trees += gc.Freed.Trees
		freedBytes += gc.FreedBytes
		return err
	})
	rep.Freed, rep.FreedBytes = freed, freedBytes
	answer := map[string]any{"pruned": pruned, "gc": rep}
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, answer)
	case pruned.Actors > 0 || freed != wsstore.ObjectCounts{}:
		writeErrorPartial(w, err, answer)
	default:
		writeError(w, err)
	}
}

// DELETE /workspace/delete-by-prefix?actor=&prefix=: removes, in one
// change, every path that starts with prefix.
func (h *Handler) wsDeletePrefix(w http.ResponseWriter, r *http.Request) {
	h.actorChange(w, r, func(ctx context.Context, actor string, q url.Values) (actors.Change, error) {
		if err := unguarded(r); err != nil {
			return actors.Change{}, err
		}
		return h.b.Actors.DeleteByPrefix(ctx, actor, q.Get("prefix"))
	})
}

// unguarded refuses the conditional headers of a write (If-Match,
// If-None-Match) on an endpoint that changes a space without honouring
// them, so that a change meant to be guarded is not made unguarded.
func unguarded(r *http.Request) error {
	for _, name := range []string{"If-Match", "If-None-Match"} {
		if len(r.Header.Values(name)) > 0 {
			return badRequest("%s %s does not honour %s (only an upload or a delete of a file does): leave it out", r.Method, r.URL.Path, name)
		}
	}
	return nil
}

// actorChange answers a request that changes the space of the actor its
// query names: authorized for writing to that actor, change retried
// while the store is busy, the change recorded as the answer.
func (h *Handler) actorChange(w http.ResponseWriter, r *http.Request, change func(ctx context.Context, actor string, q url.Values) (actors.Change, error)) {
	q := r.URL.Query()
	actor := q.Get("actor")
	if _, ok := h.authorize(w, r, access{write: true, actor: actor}); !ok {
		return
	}
	var c actors.Change
	err := h.retry(r.Context(), func() (err error) {
		c, err = change(r.Context(), actor, q)
		return err
	})
	if err != nil {
		writeChangeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, c)
}

// pageParams reads a listing's page from the query: after= and limit=
// (vfs.ParseListPage).
func pageParams(r *http.Request) (vfs.ListPage, error) {
	q := r.URL.Query()
	limit, err := intParam(q.Get("limit"), "limit", vfs.MaxListLimit)
	if err != nil {
		return vfs.ListPage{}, err
	}
	page, err := vfs.ParseListPage(q.Get("after"), limit)
	if err != nil {
		return page, badRequest("%s", err.Error())
	}
	return page, nil
}

// intParam parses an integer query parameter that takes 0..hi; "" is 0.
// A number past what an int holds (1e20, -1e20, twenty nines) is out of
// range, naming 0..hi; the caller checks a value inside against its own
// bounds.
func intParam(s, name string, hi int) (int, error) {
	n, err := parseIntParam(s, name, strconv.IntSize, int64(hi))
	return int(n), err
}

// int64Param is intParam for a parameter held in an int64.
func int64Param(s, name string, hi int64) (int64, error) {
	return parseIntParam(s, name, 64, hi)
}

func parseIntParam(s, name string, bits int, hi int64) (int64, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, bits)
	if err == nil {
		return n, nil
	}
	if errors.Is(err, strconv.ErrRange) || json.Valid([]byte(s)) && protocol.NumberPastInt(s, bits, false) {
		return 0, badRequest("%s %s is out of range: it takes an integer in 0..%d", name, s, hi)
	}
	return 0, badRequest("%s must be an integer, not %q", name, s)
}
