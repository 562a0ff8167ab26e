package protocol

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"unicode/utf8"

	"github.com/wsstore/wsstore/checkpoint"
	"github.com/wsstore/wsstore/journal"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// RunService is what the operations ask of the store's runs: exactly the
// methods of *runs.Service they call.
type RunService interface {
	CreateRun(ctx context.Context, req runs.CreateRequest) (runs.Run, error)
	Run(ctx context.Context, id string) (runs.Run, error)
	Workspace(runID string, scope runs.Scope) *runs.Workspace
	WorkspaceAt(runID string, seq int64, scope runs.Scope) *runs.Workspace
	Checkpoint(ctx context.Context, runID, reason string) (checkpoint.Checkpoint, error)
	Rollback(ctx context.Context, runID string, seq int64, opt runs.RollbackOptions) (runs.Run, error)
	DiffPage(ctx context.Context, runID string, from, to int64, opts runs.DiffOptions, page vfs.ListPage) ([]checkpoint.FileDiff, bool, error)
	Commit(ctx context.Context, runID string, sink runs.ChatSink, opt runs.CommitOptions) (runs.CommitRecord, error)
	Finish(ctx context.Context, runID string) (runs.FinishResult, error)
	SetManifest(ctx context.Context, runID string, m runs.Manifest) error
	SetStatus(ctx context.Context, runID string, to runs.Status, reason string) error
}

// JournalPager pages a run's journal, for the events operation;
// *journal.Journal implements it.
type JournalPager interface {
	Page(ctx context.Context, runID string, q journal.PageQuery) ([]journal.Event, error)
	HasEvents(ctx context.Context, runID string, after, before int64) (bool, error)
}

// Retention is what the retention operations (prune, chat.delete,
// policy.set) ask of the store's runs; *runs.Service implements it.
type Retention interface {
	Prune(ctx context.Context, opt runs.PruneOptions) (runs.PruneReport, error)
	DeleteChats(ctx context.Context, keys []runs.ChatKey, force bool) (runs.DeleteChatsResult, error)
	SetPolicy(ctx context.Context, scope string, p runs.Policy) error
}

// Backend is the store a session acts on. Retention may be nil: the
// retention operations then fail with store.invalid_options.
type Backend struct {
	Runs    RunService
	Journal JournalPager
	// Actors serves the actor.* ops; nil refuses them.
	Actors ActorSpaces
	// ActorScope, when not empty, is the actors whose spaces actor.ls and
	// actor.stats without an actor, and actors.list, reach (an HTTP token's); the others
	// are absent. None: every actor.
	ActorScope []string
	// Retention serves prune, chat.delete and policy.set; nil refuses them.
	Retention Retention
	// Records serves the record ops (context.assembled, model.request,
	// model.response, tool.call, tool.result); nil refuses them.
	Records Recorder
	// Host serves the host-side run ops (runs.list, run.delete,
	// commit.rollback, runs.diff, materialize, …); nil refuses them.
	Host HostRuns
	// Checkpoints serves checkpoints.list and checkpoint.view; nil
	// refuses them.
	Checkpoints CheckpointViews
	// Store serves stats, gc, fsck, du and reclaim; nil refuses them.
	Store Maintenance
	// Archives serves export and import; nil refuses them.
	Archives Archives
	// NoHostPaths refuses a run.create whose profile names allowPaths
	// (auth.forbidden): those are directories on the host, which a
	// client that does not own the host (an HTTP client) must not reach.
	NoHostPaths bool
	// StreamDownload names, in the error that refuses an actor.download
	// past MaxActorDownload, the way this transport streams a file of any
	// size; "": "wsctl actor download", the command beside wsctl batch.
	StreamDownload string
	// OneRequest says each session answers one request, as each POST
	// /v1/op is: no request sets a current run for another, so one that
	// acts on a run must name it ("runId"), and an unknown op is pointed
	// to GET /v1/ops rather than batch --help.
	OneRequest bool
	// MaxDiffBytes, when not 0, is the most unified text a diff or
	// runs.diff may ask an answer to hold (maxBytes): more is
	// workspace.invalid_argument. A server whose clients share its memory
	// sets it; a page of files asked for in turn reaches every file's
	// text. 0: no bound.
	MaxDiffBytes int
}

// Session is one conversation with a host: the store, and the run that
// later requests act on by default (the one the last run.create created).
// Requests of one session are handled one at a time, in order; a Session
// is not safe for concurrent use.
type Session struct {
	backend Backend
	current string
	scan    scanner // reused from line to line
	// id is the id of the request being handled; delivery, set while
	// HandleTo handles it, is where a commit's response goes from its sink.
	id       json.RawMessage
	delivery *delivery
}

// delivery is a response written from a commit's sink (HandleTo).
type delivery struct {
	write func(Response) error
	sent  bool
	err   error // write's
}

// NewSession returns a session over b with no current run.
func NewSession(b Backend) *Session {
	s := &Session{backend: b}
	s.scan.opaque = opaqueField
	return s
}

// opaqueField reports whether the value of a request's top-level field key
// is only taken as raw JSON, never decoded, when the request's op is op
// (nil: not known yet): an id always is; so is a field the op reads
// through its own UnmarshalJSON (chatRef), one the op has not (it is
// refused by name), and every field of an op that does not exist.
func opaqueField(op, key []byte) bool {
	if string(key) == "id" {
		return true
	}
	if op == nil {
		return false
	}
	o, ok := opsByName[string(op)]
	if !ok {
		return true
	}
	f, ok := fieldsOf(reflect.TypeOf(o.request[0])).byName[string(key)]
	return !ok || takesRaw(f.typ)
}

// Response is one response line.
type Response struct {
	Op     string          `json:"op"`
	ID     json.RawMessage `json:"id,omitempty"`
	OK     bool            `json:"ok"`
	Result any             `json:"result,omitempty"`
	Error  *ErrorBody      `json:"error,omitempty"`
	// Partial, on a failed response of an op that works in steps (gc,
	// prune, reclaim, actor.gc), is what the steps that committed before
	// the failure did, in the shape of the op's result; absent when they
	// changed nothing.
	Partial any `json:"partial,omitempty"`
}

// ErrorBody is a failed response's error: its code and a message for
// people.
type ErrorBody struct {
	Code    wserr.Code `json:"code"`
	Message string     `json:"message"`
}

// MaxMessageBytes bounds an error response's message: a longer one, which
// quotes a long value the host sent (a run id, a path, an op of megabytes),
// is cut to it, ending in "…".
const MaxMessageBytes = 16 << 10

// ErrorResponse answers op (id echoed) with err's code and message.
func ErrorResponse(op string, id json.RawMessage, err error) Response {
	return Response{Op: op, ID: id, OK: false, Error: &ErrorBody{Code: wserr.CodeOf(err), Message: cutMessage(wserr.MessageOf(err))}}
}

// cutMessage returns m cut to MaxMessageBytes, between characters.
func cutMessage(m string) string {
	if len(m) <= MaxMessageBytes {
		return m
	}
	const ellipsis = "…"
	n := MaxMessageBytes - len(ellipsis)
	for n > 0 && !utf8.RuneStart(m[n]) {
		n--
	}
	return m[:n] + ellipsis
}

// LineTooLong answers a line longer than max bytes, which the reader
// skipped, holding no more than max bytes of it (CodeLineTooLong).
func LineTooLong(max int) Response {
	return ErrorResponse("", nil, wserr.New(CodeLineTooLong, "", "", "line is longer than %d bytes; skipped", max))
}

// WriteResponse writes r as one line of JSON to w, in one Write. A result
// that cannot be encoded still gets its line, a store.internal error. It
// returns w's error.
func WriteResponse(w io.Writer, r Response) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		b.Reset()
		if err := enc.Encode(ErrorResponse(r.Op, r.ID, wserr.Wrap(wserr.Internal, "batch", "", err))); err != nil {
			return err
		}
	}
	_, err := w.Write(b.Bytes())
	return err
}

// Handle answers one request line (without its line ending). It never
// panics: a panic in an operation becomes a store.internal response, so
// one bad request cannot end the session. A request that ctx stops before
// its change commits is answered with CodeInterrupted.
func (s *Session) Handle(ctx context.Context, line []byte) (resp Response) {
	if len(bytes.TrimSpace(line)) == 0 {
		return ErrorResponse("", nil, wserr.New(CodeInvalidJSON, "", "", "empty line: every line must hold one JSON request object"))
	}
	if !utf8.Valid(line) {
		// encoding/json would replace the bad bytes with U+FFFD, changing
		// paths and content; JSON text is UTF-8.
		return ErrorResponse("", nil, wserr.New(CodeInvalidJSON, "", "", "the line is not valid UTF-8 (at byte %d)", invalidUTF8At(line)))
	}
	defer s.release()
	t := &s.scan.tree
	err := s.scan.scan(line)
	if errors.As(err, new(errSyntax)) {
		return ErrorResponse("", nil, wserr.New(CodeInvalidJSON, "", "", "%s", syntaxMessage(line)))
	}
	root := t.nodes[0]
	if root.kind != kindObject && root.kind != kindNull {
		return ErrorResponse("", nil, wserr.New(CodeInvalidRequest, "", "", "a request must be a JSON object with an \"op\""))
	}
	var id json.RawMessage
	opNode := int32(-1)
	if root.kind == kindObject {
		if n := t.member(0, "id"); n >= 0 {
			id = append(json.RawMessage(nil), t.raw(n)...)
		}
		opNode = t.member(0, "op")
	}
	// Keys given twice and lone surrogates, anywhere in the line, before
	// op is trusted: {"op":"write","op":"delete"} must not run a delete.
	if err != nil {
		return refuse(t, opNode, id, err.(*fieldError))
	}
	if opNode < 0 {
		return ErrorResponse("", id, wserr.New(CodeInvalidRequest, "", "", "missing \"op\""))
	}
	if t.nodes[opNode].kind != kindString {
		return ErrorResponse("", id, wserr.New(CodeInvalidRequest, "", "", "\"op\" must be a string"))
	}
	op := string(t.text(t.nodes[opNode]))
	o, ok := opsByName[op]
	if !ok {
		where := "batch --help"
		if s.backend.OneRequest {
			where = "GET /v1/ops"
		}
		return ErrorResponse(op, id, wserr.New(CodeUnknownOp, "", "", "unknown op %q (%s lists them)", op, where))
	}
	// A run named to an op that acts on none would be ignored: a prune,
	// a policy.set or a gc would act on the whole store.
	if n := t.member(0, "runId"); o.noRun && n >= 0 && t.nodes[n].kind != kindNull {
		return ErrorResponse(op, id, wserr.New(CodeInvalidRequest, "", "", "%s acts on no run: it takes no \"runId\"", op))
	}
	// An empty run id is a host's mistake (an unset variable), never the
	// session's current run: nothing a host sends is guessed at.
	for _, f := range []string{"runId", "fromRunId", "toRunId"} {
		if n := t.member(0, f); n >= 0 && t.nodes[n].kind == kindString && len(t.text(t.nodes[n])) == 0 {
			return ErrorResponse(op, id, wserr.New(CodeInvalidRequest, "", "", "%q is empty: name a run, or leave it out for the session's run", f))
		}
	}
	defer func() {
		if r := recover(); r != nil {
			resp = ErrorResponse(op, id, wserr.New(wserr.Internal, op, "", "panic: %v", r))
		}
	}()
	s.id = id
	defer func() { s.id = nil }()
	result, err := o.handle(s, ctx, request{t})
	if err != nil {
		var fe *fieldError
		if errors.As(err, &fe) && fe.inField("id") {
			id = nil
		}
		var done any
		if p, ok := errors.AsType[*partialError](err); ok {
			done = p.done
		}
		if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
			err = Interrupted("the request was stopped before it was done")
		}
		resp := ErrorResponse(op, id, err)
		resp.Partial = done
		return resp
	}
	return Response{Op: op, ID: id, OK: true, Result: result}
}

// partialError is the error of an op that failed after some of its steps
// had committed: done is what they did, in the shape of the op's result.
type partialError struct {
	done any
	err  error
}

func (e *partialError) Error() string { return e.err.Error() }
func (e *partialError) Unwrap() error { return e.err }

// withPartial is err, carrying done as the failed response's partial when
// changed says the steps that committed before the failure changed
// something.
func withPartial(done any, changed bool, err error) error {
	if err == nil || !changed {
		return err
	}
	return &partialError{done: done, err: err}
}

// HandleTo answers line as Handle does, for a transport that writes each
// response where the host reads it (a batch's output, an HTTP response).
// For most ops it returns the response unwritten, sent false, and the
// transport writes it (after retrying a store.busy, if it will). The
// response of a commit or commit.rollback is the delivery of the message
// into the host's chat, so it is written through write from the commit's
// sink, before the commit's outcome is recorded: the commit is completed
// only once write has taken the response, and a process that ends in
// between leaves it pending for commit.resolve, as with any sink. Then
// sent is true and resp must not be written again; err is write's error
// (the commit is recorded failed: the host never had the message and may
// commit again), or an *AfterDeliveryError when the response went out and
// what came after it failed (the outcome could not be recorded: the
// commit stays pending).
func (s *Session) HandleTo(ctx context.Context, line []byte, write func(Response) error) (resp Response, sent bool, err error) {
	d := &delivery{write: write}
	s.delivery = d
	defer func() { s.delivery = nil }()
	resp = s.Handle(ctx, line)
	switch {
	case !d.sent:
		return resp, false, nil
	case d.err != nil:
		return resp, true, d.err
	case !resp.OK:
		return resp, true, &AfterDeliveryError{Response: resp}
	}
	return resp, true, nil
}

// AfterDeliveryError is what HandleTo returns when a commit's response
// had been written and recording its outcome failed: Response is the
// answer that could not be sent in its place.
type AfterDeliveryError struct{ Response Response }

func (e *AfterDeliveryError) Error() string {
	return fmt.Sprintf("%s %s: the response was delivered, then: %s (%s)", e.Response.Op, e.Response.ID, e.Response.Error.Message, e.Response.Error.Code)
}

// release drops the references a handled line left in the scanner, and
// the node array itself after a large line.
func (s *Session) release() {
	s.scan.data = nil
	if cap(s.scan.nodes) > 1<<16 {
		s.scan.nodes = nil
	}
	if cap(s.scan.stack) > maxDepth*2 {
		s.scan.stack = nil
	}
}

// refuse answers a line the scanner refused. The answer names the op
// unless the op is what is wrong, and echoes the id unless the id is.
func refuse(t *tree, opNode int32, id json.RawMessage, fe *fieldError) Response {
	var op string
	if !fe.inField("op") && opNode >= 0 && t.nodes[opNode].kind == kindString {
		op = string(t.text(t.nodes[opNode]))
	}
	if fe.inField("id") {
		id = nil
	}
	return ErrorResponse(op, id, wserr.New(CodeInvalidRequest, "", "", "%s", fe.Msg))
}

// syntaxMessage explains why line, valid UTF-8, is not JSON, in
// encoding/json's words (the words hosts have always seen).
func syntaxMessage(line []byte) string {
	if bytes.HasPrefix(line, []byte("\ufeff")) {
		return "the line starts with a byte order mark (U+FEFF): send JSON text without one"
	}
	var v json.RawMessage
	if err := json.Unmarshal(line, &v); err != nil {
		return strings.TrimPrefix(err.Error(), "json: ")
	}
	return "invalid JSON"
}

// invalidUTF8At returns the offset of the first byte of b that is not
// valid UTF-8.
func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return len(b)
}

// request is a scanned request line, handed to its operation.
type request struct{ t *tree }

// decode reads the line into req, a pointer to the op's request type,
// strictly: a field name that is not req's (spelled exactly) or a value of
// the wrong type is batch.invalid_request naming the field.
func (r request) decode(req any) error {
	if err := decode(r.t, 0, req); err != nil {
		var fe *fieldError
		var we *wserr.Error
		switch {
		case errors.As(err, &fe):
			return wserr.Wrap(CodeInvalidRequest, "", "", fe)
		case errors.As(err, &we):
			return err // from a field's own UnmarshalJSON
		}
		return invalidRequest("%s", strings.TrimPrefix(err.Error(), "json: "))
	}
	return nil
}

// decodeField reads the request's top-level field name, known to be there,
// into v, strictly, naming fields below it ("manifest.artifacts[0].id").
func (r request) decodeField(name string, v any) error {
	var key int32 = -1
	r.t.members(0, func(k, _ int32) bool {
		if string(r.t.key(k)) == name {
			key = k
		}
		return true
	})
	return decode(r.t, key+1, v, step{key: key})
}
