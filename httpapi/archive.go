package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/wsstore/wsstore/archive"
	"github.com/wsstore/wsstore/tokens"
	"github.com/wsstore/wsstore/wserr"
)

// Archiver writes and reads archives as streams; *archive.Archiver
// implements it.
type Archiver interface {
	Export(ctx context.Context, w io.Writer, scope archive.Scope, opt archive.Options) (archive.Summary, error)
	CheckExport(ctx context.Context, scope archive.Scope) error
	Import(ctx context.Context, r io.Reader, opt archive.Options) (archive.Summary, error)
}

// SummaryTrailer is the trailer of an export's response that holds its
// summary as JSON (the body is the archive).
const SummaryTrailer = "Wsstore-Summary"

// GET /v1/export?run=&chat=&actor=&all=&skipWorkspace=: an archive
// (docs/archive.md) of what wsctl export's flags of the same names select
// (run, chat and actor repeat), streamed as the body; its summary comes in
// the Wsstore-Summary trailer. A token limited to actors may export only
// those actors' spaces. An error before the first byte is answered with
// its code; one after it aborts the response, so the client sees a
// truncated archive, which import refuses.
//
// HEAD answers the status and headers GET would, after the same checks
// of the parameters, the token and that every run, chat and actor named
// exists (Archiver.CheckExport), without exporting: no length, no
// summary, and no transfer's turn taken.
func (h *Handler) export(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	scope := archive.Scope{Runs: q["run"], Chats: q["chat"], Actors: q["actor"]}
	var err error
	if scope.All, err = boolParam(q.Get("all"), "all"); err == nil {
		scope.SkipWorkspace, err = boolParam(q.Get("skipWorkspace"), "skipWorkspace")
	}
	t, ok := h.authorize(w, r, access{anyToken: true})
	if !ok {
		return
	}
	if err == nil {
		err = mayExport(t, scope)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	aw := &archiveWriter{w: w, progress: h.progressWriter(w)}
	if r.Method == http.MethodHead {
		err = h.retry(r.Context(), func() error { return h.b.Archive.CheckExport(r.Context(), scope) })
		if err != nil {
			writeError(w, err)
			return
		}
		aw.start()
		return
	}
	release, ok := h.turn(w, r)
	if !ok {
		return
	}
	defer release()
	var sum archive.Summary
	err = h.retry(r.Context(), func() (err error) {
		// Busy is retried only before the first byte went out.
		sum, err = h.b.Archive.Export(r.Context(), aw, scope, archive.Options{})
		if err != nil && aw.started {
			err = abortError{err}
		}
		return err
	})
	if ae := (abortError{}); errors.As(err, &ae) {
		// The status is out: the archive is cut short, and the log line
		// says why, as for a download.
		if lw, ok := w.(*logWriter); ok {
			lw.aborted = ae.error
		}
		panic(http.ErrAbortHandler)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	aw.start() // an empty archive still gets its headers
	b, _ := json.Marshal(sum)
	w.Header().Set(SummaryTrailer, string(b))
}

// abortError is an export that failed after its first byte went out.
type abortError struct{ error }

// mayExport checks that t may read everything scope selects: a token
// limited to actors, only those actors' spaces. Errors: wserr.Forbidden.
func mayExport(t tokens.Token, scope archive.Scope) error {
	if t.AllActors() {
		return nil
	}
	if scope.All || len(scope.Runs) > 0 || len(scope.Chats) > 0 {
		return forbidden("this token is limited to actors %s: it may export only their spaces (?actor=)", strings.Join(t.Actors, ", "))
	}
	for _, a := range scope.Actors {
		// An empty name touches no space: the export refuses it
		// (workspace.invalid_actor), as for every token.
		if a != "" && !t.AllowsActor(a) {
			return forbidden("this token may not export actor %q", a)
		}
	}
	return nil
}

// archiveWriter sends the export's headers with its first byte, so that
// an export refused before it writes anything gets an error response.
type archiveWriter struct {
	w        http.ResponseWriter
	progress io.Writer
	started  bool
}

func (a *archiveWriter) start() {
	if a.started {
		return
	}
	a.started = true
	hd := a.w.Header()
	hd.Set("Content-Type", "application/x-tar")
	hd.Set("Content-Disposition", `attachment; filename="wsstore-export.wsar"`)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Trailer", SummaryTrailer)
	a.w.WriteHeader(http.StatusOK)
}

func (a *archiveWriter) Write(p []byte) (int, error) {
	a.start()
	return a.progress.Write(p)
}

// POST /v1/import: the body is an archive, streamed into the store; the
// answer is its summary, as wsctl import --json prints it. Everything is
// verified before anything is visible: a damaged archive fails with
// archive.corrupt, another version with archive.unsupported_version, and
// nothing is imported. Objects the store holds otherwise are left as they
// are and listed in the summary's conflicts, answered 409 store.conflict
// (with the summary) once the rest is imported, as wsctl import exits 5.
// It needs a write token not limited to actors: an archive may hold
// anything.
func (h *Handler) importArchive(w http.ResponseWriter, r *http.Request) {
	if _, ok := h.authorize(w, r, access{write: true, store: true}); !ok {
		return
	}
	var body io.Reader = r.Body
	if limit := h.opts.MaxUploadBytes; limit > 0 {
		if r.ContentLength > limit {
			// Refused as it is announced, before a byte of it is read,
			// as an upload is.
			writeError(w, archiveTooLarge(limit))
			return
		}
		body = http.MaxBytesReader(w, r.Body, limit)
	}
	release, ok := h.turn(w, r)
	if !ok {
		return
	}
	defer release()
	var sum archive.Summary
	// A body cut short also ends the request's context (the server
	// cancels it when the connection's read fails), which the import may
	// see first: the body's error is what the client is answered.
	read := &bodyError{r: clientBody{body, "read the archive"}}
	err := h.replaying(r, h.progressReader(w, read), func(src io.Reader) (err error) {
		// The host's directories are not the client's to reach (see
		// Handler.protocol).
		sum, err = h.b.Archive.Import(r.Context(), src, archive.Options{NoHostPaths: true})
		return err
	})
	if err != nil {
		if read.err != nil {
			err = read.err
		}
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			err = archiveTooLarge(mbe.Limit)
		}
		writeError(w, err)
		return
	}
	if sum.ConflictCount > 0 {
		err := wserr.New(wserr.Conflict, "import", "", "%d objects conflict with the store and were left as they are", sum.ConflictCount)
		writeJSON(w, http.StatusConflict, map[string]any{"error": map[string]any{"code": wserr.CodeOf(err), "message": wserr.MessageOf(err)}, "result": sum})
		return
	}
	writeJSON(w, http.StatusOK, sum)
}

// bodyError reads a request's body, keeping the first error other than
// its end that reading it gave.
type bodyError struct {
	r   io.Reader
	err error
}

func (b *bodyError) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF && b.err == nil {
		b.err = err
	}
	return n, err
}

func archiveTooLarge(limit int64) error {
	return wserr.New(wserr.SizeLimitExceeded, "import", "", "the archive is larger than this server takes (%d bytes)", limit)
}

// boolParam parses a boolean query parameter; "" is false.
func boolParam(s, name string) (bool, error) {
	if s == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return false, badRequest("%s must be true or false, not %q", name, s)
	}
	return b, nil
}
