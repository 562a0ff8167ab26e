package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/wsstore/wsstore/protocol"
	"github.com/wsstore/wsstore/tokens"
	"github.com/wsstore/wsstore/wserr"
)

// hostFileOps are the ops that read or write a file on the host by its
// path (an archive): over HTTP they would hand the server's file system
// to its clients, so /v1/op refuses them; GET /v1/export and POST
// /v1/import stream the archive in the request or the response instead.
var hostFileOps = map[string]bool{"export": true, "import": true}

// contentOps are the ops whose answer holds a file's content, read
// whole: each takes a transfer's turn (Options.MaxTransfers), as a
// download does, however small its request.
var contentOps = map[string]bool{"read": true, "host.read": true, "actor.download": true, "diff": true, "runs.diff": true}

// listOps are the ops that answer a page of a listing, up to
// vfs.MaxListLimit entries (tens of MiB of JSON): one whose page may hold
// more than MaxListEntriesUnturned takes a transfer's turn, as a listing
// through GET /workspace/files or /v1/runs/{run}/files does.
var listOps = map[string]bool{"list": true, "host.list": true, "actor.ls": true, "actor.diff": true, "checkpoint.view": true, "actors.list": true}

// MaxListEntriesUnturned is the most entries a listing page may be asked
// for (its limit; none asks for vfs.DefaultListLimit) and be served at
// once: a larger page takes a transfer's turn (Options.MaxTransfers), so
// the memory that listings hold grows with the turns, not with how many
// are asked for at once.
const MaxListEntriesUnturned = 1000

// largeList reports whether a listing page asked for with limit (0: the
// default) may hold more than MaxListEntriesUnturned entries.
func largeList(limit int) bool {
	return limit == 0 || limit > MaxListEntriesUnturned
}

// spacesOps are the ops that, without an actor, read across the actor
// spaces: a token limited to actors gets its actors' alone
// (protocol.Backend.ActorScope), as GET /workspace/files and
// /workspace/stats without actor= give. actors.list takes no actor.
var spacesOps = map[string]bool{"actor.ls": true, "actor.stats": true, "actors.list": true}

// opAccess is what the request line asks of its token. Only the top-level
// "op" and "actor" are looked at; a line that does not decode asks the
// most (a change, beyond one actor), so a token is never checked for less
// than the session then does: the session refuses every line whose keys
// repeat or whose fields it does not know, which this decoding would read
// differently.
func opAccess(line []byte) access {
	var fields map[string]json.RawMessage
	if !utf8.Valid(line) || json.Unmarshal(line, &fields) != nil {
		return access{write: true, store: true, unreadable: true}
	}
	var id json.RawMessage
	if raw := fields["id"]; json.Valid(raw) {
		id = raw
	}
	var op, actor string
	if raw := fields["op"]; len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &op) != nil {
		// No string (null included, which would decode as "").
		return access{write: true, store: true, unreadable: true, id: id}
	}
	if !protocol.Known(op) {
		// An op the table does not have names nothing that could run, as
		// a line with no op: any token gets the session's batch.unknown_op.
		return access{anyToken: true, op: op, id: id}
	}
	a := access{write: !protocol.ReadOnly(op), store: true, op: op, id: id}
	if op == "actors.list" {
		a.store, a.spaces = false, true
	} else if strings.HasPrefix(op, "actor.") {
		if raw, ok := fields["actor"]; ok && json.Unmarshal(raw, &actor) == nil && actor != "" {
			a.store, a.actor = false, actor
		} else if spacesOps[op] && (!ok || string(raw) == `""` || string(raw) == "null") {
			// The spaces the token may reach (the session's ActorScope);
			// a null field is absent, as the session reads it.
			a.store, a.spaces = false, true
		}
	}
	if listOps[op] {
		// A limit that is no integer is refused by the session; the
		// turn it takes costs nothing more.
		var limit int
		if raw, ok := fields["limit"]; ok && string(raw) != "null" && json.Unmarshal(raw, &limit) != nil {
			limit = -1
		}
		a.largeList = limit < 0 || largeList(limit)
	}
	if op == "actor.upload" {
		var content string
		if json.Unmarshal(fields["content"], &content) == nil {
			a.fileBytes = int64(len(content))
		}
		if json.Unmarshal(fields["contentBase64"], &content) == nil {
			content = strings.TrimRight(content, "=")
			a.fileBytes = max(a.fileBytes, int64(len(content))*3/4)
		}
	}
	return a
}

// MaxDiffBytes is the most unified text a diff's page may be asked to
// hold (maxBytes) through this API, the ops' and GET /v1/runs/{run}/diff:
// a page is held whole while it is answered, and a page of fewer files,
// asked for in turn, reaches every file's text (a file with a side past
// checkpoint.MaxDiffBytes has none).
const MaxDiffBytes = 16 << 20

// protocol is the backend of /v1/op's sessions for tok: the store's,
// without the host's file system (see also hostFileOps), reaching across
// the actor spaces only tok's actors', whose errors name this API's ways
// rather than commands of the server's host.
func (h *Handler) protocol(tok tokens.Token) protocol.Backend {
	b := h.b.Protocol
	b.NoHostPaths = true
	b.ActorScope = tok.Actors
	b.StreamDownload = "GET /workspace/file?actor=&path="
	b.OneRequest = true
	b.MaxDiffBytes = MaxDiffBytes
	return b
}

// readRequest reads an op's body, declared bytes long (-1: not said). The
// buffer doubles as bytes arrive, never past the declared length: a body
// takes about its own size in memory, and a length claimed with no bytes
// behind it costs nothing.
func readRequest(body io.Reader, declared int64) ([]byte, error) {
	if declared < 0 {
		return io.ReadAll(body)
	}
	b := make([]byte, 0, min(declared, 64<<10))
	for int64(len(b)) < declared {
		if len(b) == cap(b) {
			b = slices.Grow(b, int(min(int64(len(b)), declared-int64(len(b)))))
		}
		n, err := body.Read(b[len(b):int(min(int64(cap(b)), declared))])
		b = b[:len(b)+n]
		if err == io.EOF && int64(len(b)) < declared {
			return nil, io.ErrUnexpectedEOF
		}
		if err != nil && err != io.EOF {
			return nil, err
		}
		if err == io.EOF {
			break
		}
	}
	return b, nil
}

// POST /v1/op: one request object of the host protocol (wsctl batch's
// line) in the body, one response object back, with the HTTP status of
// its code. Each request has a session of its own, so there is no
// current run: a request names its run with "runId".
func (h *Handler) op(w http.ResponseWriter, r *http.Request) {
	// The token first: a client without one must not make the server
	// hold a body of up to MaxRequestBytes. What the op needs is checked
	// once it is read.
	tok, ok := h.authorize(w, r, access{anyToken: true})
	if !ok {
		return
	}
	if r.ContentLength > h.opts.MaxRequestBytes {
		// Refused as it is announced, before a byte of it is read.
		writeResponse(w, protocol.LineTooLong(int(h.opts.MaxRequestBytes)))
		return
	}
	turned := false
	if r.ContentLength < 0 || r.ContentLength > replayable {
		// The body is held whole: one past the size a batch line takes
		// in a breath (or of a length not given) is a transfer.
		release, ok := h.turn(w, r)
		if !ok {
			return
		}
		defer release()
		turned = true
	}
	line, err := readRequest(http.MaxBytesReader(w, r.Body, h.opts.MaxRequestBytes), r.ContentLength)
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		writeResponse(w, protocol.LineTooLong(int(h.opts.MaxRequestBytes)))
		return
	}
	if err != nil {
		writeError(w, badRequest("read the request: %v", err))
		return
	}
	line = bytes.TrimSpace(line)
	a := opAccess(line)
	if err := permit(tok, a); err != nil {
		if a.unreadable {
			// Nothing in it could run, whatever the token may do: the
			// client's mistake, said as such. (It is not handed to a
			// session, which might read more of it than opAccess did.)
			code, msg := protocol.CodeInvalidRequest, "a request must be a JSON object with a string \"op\""
			if !json.Valid(line) || !utf8.Valid(line) {
				code, msg = protocol.CodeInvalidJSON, "the body is not one JSON value in UTF-8"
			}
			err = wserr.New(code, "", "", "%s", msg)
		}
		writeResponse(w, protocol.ErrorResponse(a.op, a.id, err))
		return
	}
	if a.op != "" && hostFileOps[a.op] {
		writeResponse(w, protocol.ErrorResponse(a.op, a.id, forbidden("%s names a file on the server's host, which /v1/op does not touch: stream the archive with GET /v1/export or POST /v1/import", a.op)))
		return
	}
	if limit := h.opts.MaxUploadBytes; limit > 0 && a.fileBytes > limit {
		writeResponse(w, protocol.ErrorResponse(a.op, a.id, tooLarge("", limit)))
		return
	}
	if !turned && (contentOps[a.op] || a.largeList) {
		// Its answer holds a file's content (up to 16 MiB, several
		// times that while encoded), or a listing's page of up to
		// vfs.MaxListLimit entries: a download, served in turn.
		release, err := h.waitTurn(r)
		if err != nil {
			if wserr.Is(err, wserr.Busy) {
				w.Header().Set("Retry-After", "1")
				writeResponse(w, protocol.ErrorResponse(a.op, a.id, err))
			}
			return
		}
		defer release()
	}
	// A commit's response delivers its message: it is written and flushed
	// from the commit's sink, and the commit is completed only if that
	// went through (protocol.Session.HandleTo). A commit that failed after
	// it has nothing more to send.
	var resp protocol.Response
	sent := false
	var late error
	deliver := func(resp protocol.Response) error {
		if err := writeResponse(w, resp); err != nil {
			return err
		}
		err := http.NewResponseController(w).Flush()
		if errors.Is(err, http.ErrNotSupported) {
			return nil // a writer that cannot flush: written is all there is to know
		}
		return err
	}
	_ = h.retry(r.Context(), func() error {
		resp, sent, late = protocol.NewSession(h.protocol(tok)).HandleTo(r.Context(), line, deliver)
		// An op that failed busy after some of its steps committed is
		// answered with what they did (partial), not run again: the
		// answer of another run would leave them out.
		if !sent && resp.Error != nil && resp.Error.Code == wserr.Busy && resp.Partial == nil {
			return wserr.New(wserr.Busy, "", "", "busy")
		}
		return nil
	})
	if !sent {
		writeResponse(w, resp)
		return
	}
	if lw, ok := w.(*logWriter); ok && late != nil {
		lw.aborted = late // the access log says what came after the response
	}
}

// writeResponse answers a protocol response with the status of its code.
// It returns the write's error.
func writeResponse(w http.ResponseWriter, resp protocol.Response) error {
	status := http.StatusOK
	if resp.Error != nil {
		status = protocol.HTTPStatus(resp.Error.Code)
		retryAfter(w, resp.Error.Code)
	}
	var b bytes.Buffer
	_ = protocol.WriteResponse(&b, resp)
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	// Its length stated, an answer flushed before the handler ends (a
	// commit's, from its sink) is whole to the client once flushed, not
	// left waiting for a closing chunk.
	w.Header().Set("Content-Length", strconv.Itoa(b.Len()))
	w.WriteHeader(status)
	_, err := w.Write(b.Bytes())
	return err
}

// opsHelpIntro opens GET /v1/ops: what follows is batch's reference,
// which speaks of lines and of a session's current run.
const opsHelpIntro = `Over HTTP, POST /v1/op takes one request object as its body and answers
one response object, with the HTTP status of its code. Each request stands
alone: there is no current run, so an op that acts on a run names it
("runId"). The export and import ops, which name files on the server's
host, are refused: GET /v1/export and POST /v1/import stream archives
instead. The rest of wsctl batch's reference below holds for /v1/op.

`

// GET /v1/ops: the op table's help, as wsctl batch --help prints it, after
// what differs over HTTP.
func (h *Handler) opsHelp(w http.ResponseWriter, r *http.Request) {
	if _, ok := h.authorize(w, r, access{anyToken: true}); !ok {
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, opsHelpIntro+protocol.Help())
}
