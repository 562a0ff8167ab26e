package httpapi

import (
	"context"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/actors"
	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/checkpoint"
	"github.com/wsstore/wsstore/journal"
	"github.com/wsstore/wsstore/protocol"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/tokens"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// Verifier checks bearer tokens; *tokens.Store implements it.
type Verifier interface {
	Verify(ctx context.Context, token string) (tokens.Token, error)
}

// ActorSpaces is what the Workspace endpoints ask of actor spaces;
// *actors.Spaces implements it.
type ActorSpaces interface {
	ListPage(ctx context.Context, actor, path string, depth int, page vfs.ListPage) ([]vfs.Listed, bool, error)
	UploadWith(ctx context.Context, actor, path string, r io.Reader, opt actors.ChangeOptions) (actors.Change, error)
	Download(ctx context.Context, actor, path string) (io.ReadCloser, vfs.Entry, error)
	Stat(ctx context.Context, actor, path string) (vfs.Entry, error)
	DeleteWith(ctx context.Context, actor, path string, opt actors.ChangeOptions) (actors.Change, error)
	DeleteByPrefix(ctx context.Context, actor, prefix string) (actors.Change, error)
	Stats(ctx context.Context, actor string) (actors.Stats, error)
	WorkspacePage(ctx context.Context, only []string, path string, depth int, cursor actors.WorkspaceCursor, limit int) ([]actors.WorkspaceEntry, bool, error)
	StatsPage(ctx context.Context, only []string, after string, limit int) ([]actors.Stats, bool, error)
	GC(ctx context.Context, opt actors.GCOptions) (actors.GCReport, error)
}

// Collector is seed 004's Workspace GC: prune actors' old versions, then
// collect the store; *wsstore.Store implements it.
type Collector interface {
	ActorGC(ctx context.Context, opt actors.GCOptions, gc wsstore.GCOptions) (actors.GCReport, wsstore.GCReport, error)
}

// RunReader is what the run views read; *runs.Service implements it.
type RunReader interface {
	Run(ctx context.Context, id string) (runs.Run, error)
	Workspace(runID string, scope runs.Scope) *runs.Workspace
	WorkspaceAt(runID string, seq int64, scope runs.Scope) *runs.Workspace
	DiffPage(ctx context.Context, runID string, from, to int64, opts runs.DiffOptions, page vfs.ListPage) ([]checkpoint.FileDiff, bool, error)
}

// CheckpointLister lists a run's checkpoints a page at a time;
// *checkpoint.Store implements it.
type CheckpointLister interface {
	PageMore(ctx context.Context, runID string, afterSeq int64, limit int) ([]checkpoint.Checkpoint, bool, error)
}

// JournalReader pages and follows a run's journal; *journal.Journal
// implements it.
type JournalReader interface {
	Page(ctx context.Context, runID string, q journal.PageQuery) ([]journal.Event, error)
	HasEvents(ctx context.Context, runID string, after, before int64) (bool, error)
	FollowWhile(ctx context.Context, runID string, afterSeq int64, poll time.Duration, alive func(context.Context) error, fn func(journal.Event) error) error
}

// Blobs reads ranges of stored contents as streams; *cas.Store
// implements it.
type Blobs interface {
	GetRange(ctx context.Context, h cas.Hash, off, n int64) (io.ReadCloser, error)
}

// Backend is the store the handler serves. Every field is required.
type Backend struct {
	Tokens      Verifier
	Actors      ActorSpaces
	GC          Collector
	Protocol    protocol.Backend
	Runs        RunReader
	Checkpoints CheckpointLister
	Journal     JournalReader
	Blobs       Blobs
	Archive     Archiver
}

// FromStore returns the backend over an open store: every op wsctl batch
// serves (export and import as streams: GET /v1/export, POST /v1/import,
// rather than as ops naming files on the server's host; see hostFileOps).
func FromStore(st *wsstore.Store) Backend {
	return Backend{
		Tokens: st.Tokens, Actors: st.Actors, GC: st,
		Protocol: protocol.Backend{Runs: st.Runs, Journal: st.Journal, Actors: st.Actors, Retention: st.Runs,
			Records: st.Runs, Host: st.Runs, Checkpoints: st.Checkpoints, Store: st},
		Runs: st.Runs, Checkpoints: st.Checkpoints, Journal: st.Journal, Blobs: st.Blobs, Archive: st.Archive,
	}
}

// Options configure the handler. The zero value means the defaults; a
// negative limit where none has a meaning is refused (Validate).
type Options struct {
	// MaxRequestBytes bounds a JSON request body (an op request);
	// default DefaultMaxRequestBytes, batch's longest line.
	MaxRequestBytes int64
	// MaxUploadBytes bounds an upload; 0: no bound, uploads stream.
	MaxUploadBytes int64
	// BusyDeadline is how long a request retries a busy store before it
	// answers store.busy; default DefaultBusyDeadline.
	BusyDeadline time.Duration
	// CORSOrigins are the origins a browser may call the API from ("*":
	// any). None: no CORS headers, so browsers on other origins are
	// refused.
	CORSOrigins []string
	// FollowPoll is how often a journal follow polls; default 200ms.
	FollowPoll time.Duration
	// MaxWait bounds a long poll's wait; default 60s.
	MaxWait time.Duration
	// Heartbeat is how often a server-sent events stream sends a comment
	// line while nothing happens; default 15s.
	Heartbeat time.Duration
	// IOTimeout is how long an upload or download may make no progress
	// before it is cut; it extends the server's read and write deadlines
	// as bytes flow, so a large transfer is not cut by them. It is also
	// the time every answer has to be written from when it starts to go
	// out: the server's write deadline, set when the request arrived, is
	// lifted while the request is worked on, so slow work (a collection,
	// a wait for a busy store) is still answered. Default 60s; negative:
	// the server's deadlines apply unchanged.
	IOTimeout time.Duration
	// ReadIOTimeout and WriteIOTimeout, when not zero, take IOTimeout's
	// place for request bodies (uploads, imports) and for answers
	// (downloads, exports, and every other answer's window) alone;
	// `wsctl serve` sets them from --read-timeout and --write-timeout.
	// Negative: that direction's deadline is left as the server set it.
	ReadIOTimeout, WriteIOTimeout time.Duration
	// SpoolDir is where an upload or import larger than 1 MiB is copied
	// as it streams, so that it can be sent to a busy store again; the
	// copy is removed once stored. Default: the system's temporary
	// directory.
	SpoolDir string
	// AccessLog receives one line per request; nil: none.
	AccessLog io.Writer
	// MaxTransfers bounds the uploads, downloads, imports, exports,
	// diffs and listing pages of more than MaxListEntriesUnturned entries
	// served at once, each of which holds a few MiB: one more
	// waits for a turn up to BusyDeadline, then is answered 503
	// store.busy. The turn is taken once the request's token allows it:
	// a refusal (401, 403) never waits. Default DefaultMaxTransfers;
	// negative: no bound.
	MaxTransfers int
}

// Defaults of Options.
const (
	DefaultMaxRequestBytes = 64 << 20
	DefaultBusyDeadline    = 30 * time.Second
	DefaultMaxTransfers    = 8
)

func (o Options) withDefaults() Options {
	if o.MaxRequestBytes <= 0 {
		o.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if o.BusyDeadline <= 0 {
		o.BusyDeadline = DefaultBusyDeadline
	}
	if o.FollowPoll <= 0 {
		o.FollowPoll = 200 * time.Millisecond
	}
	if o.MaxWait <= 0 {
		o.MaxWait = 60 * time.Second
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = 15 * time.Second
	}
	if o.IOTimeout == 0 {
		o.IOTimeout = 60 * time.Second
	}
	if o.ReadIOTimeout == 0 {
		o.ReadIOTimeout = o.IOTimeout
	}
	if o.WriteIOTimeout == 0 {
		o.WriteIOTimeout = o.IOTimeout
	}
	if o.MaxTransfers == 0 {
		o.MaxTransfers = DefaultMaxTransfers
	}
	return o
}

// Handler serves the API. It is safe for concurrent use: reads run in
// parallel, writes queue on the store's one writer.
type Handler struct {
	b    Backend
	opts Options
	mux  *http.ServeMux

	// closing ends the streams that would otherwise never finish (journal
	// follows), so a graceful shutdown can complete.
	closeOnce sync.Once
	closing   chan struct{}
	// transfers holds a token per transfer in progress (MaxTransfers);
	// nil: no bound.
	transfers chan struct{}
}

// Validate refuses, with store.invalid_options naming the field, a
// negative MaxRequestBytes, MaxUploadBytes, BusyDeadline, FollowPoll,
// MaxWait or Heartbeat: zero asks for the default (for MaxUploadBytes, no
// bound), and no negative one means anything. (A negative IOTimeout,
// ReadIOTimeout, WriteIOTimeout or MaxTransfers has a meaning of its own.)
// New checks it.
func (o Options) Validate() error {
	for _, f := range []struct {
		name string
		neg  bool
		v    any
	}{
		{"MaxRequestBytes", o.MaxRequestBytes < 0, o.MaxRequestBytes},
		{"MaxUploadBytes", o.MaxUploadBytes < 0, o.MaxUploadBytes},
		{"BusyDeadline", o.BusyDeadline < 0, o.BusyDeadline},
		{"FollowPoll", o.FollowPoll < 0, o.FollowPoll},
		{"MaxWait", o.MaxWait < 0, o.MaxWait},
		{"Heartbeat", o.Heartbeat < 0, o.Heartbeat},
	} {
		if f.neg {
			return wserr.New(wserr.InvalidOptions, "httpapi", "", "Options.%s is %v: it must not be negative (0: the default)", f.name, f.v)
		}
	}
	return nil
}

// New returns the handler over b. It fails with store.invalid_options for
// options Validate refuses.
func New(b Backend, opts Options) (*Handler, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	h := &Handler{b: b, opts: opts.withDefaults(), mux: http.NewServeMux(), closing: make(chan struct{})}
	if h.opts.MaxTransfers > 0 {
		h.transfers = make(chan struct{}, h.opts.MaxTransfers)
	}
	h.routes()
	return h, nil
}

// turn waits for a turn to serve a transfer (a stream of a file or an
// archive) while fewer than MaxTransfers are served: the memory transfers
// hold grows with how many run at once, not with their sizes. It is taken
// once the request's token is checked, so a request the token may not
// make is refused (401, 403) at once, never queued behind transfers. A
// request that finds no turn within BusyDeadline is answered 503
// store.busy, its body unread, and ok is false; else release gives the
// turn back.
func (h *Handler) turn(w http.ResponseWriter, r *http.Request) (release func(), ok bool) {
	release, err := h.waitTurn(r)
	if err != nil {
		if wserr.Is(err, wserr.Busy) {
			w.Header().Set("Retry-After", "1")
			writeError(w, err)
		}
		return nil, false
	}
	return release, true
}

// listTurn is turn for a listing whose page holds up to limit entries
// (0: the default): only a page that may hold more than
// MaxListEntriesUnturned waits for a turn; a smaller one is served at once
// (release then does nothing).
func (h *Handler) listTurn(w http.ResponseWriter, r *http.Request, limit int) (release func(), ok bool) {
	if !largeList(limit) {
		return func() {}, true
	}
	return h.turn(w, r)
}

// waitTurn is turn that leaves the answer to its caller: it fails with
// store.busy when no turn came within BusyDeadline, or with the request's
// context's error when the client went away.
func (h *Handler) waitTurn(r *http.Request) (release func(), err error) {
	if h.transfers == nil {
		return func() {}, nil
	}
	select {
	case h.transfers <- struct{}{}:
	default:
		t := time.NewTimer(h.opts.BusyDeadline)
		defer t.Stop()
		select {
		case h.transfers <- struct{}{}:
		case <-t.C:
			return nil, wserr.New(wserr.Busy, "http", "", "this server serves %d transfers at once (--max-transfers), all in progress: try again", h.opts.MaxTransfers)
		case <-r.Context().Done():
			return nil, r.Context().Err()
		}
	}
	return func() { <-h.transfers }, nil
}

// Close ends the journal follows in flight and refuses new ones, so that
// http.Server.Shutdown, which waits for every request, can finish;
// register it with Server.RegisterOnShutdown. Other requests are not
// touched: they finish.
func (h *Handler) Close() {
	h.closeOnce.Do(func() { close(h.closing) })
}

func (h *Handler) routes() {
	m := h.mux
	m.HandleFunc("GET /healthz", h.healthz)

	m.HandleFunc("GET /workspace/files", h.wsFiles)
	m.HandleFunc("GET /workspace/file", h.wsDownload)
	m.HandleFunc("POST /workspace/upload", h.wsUpload)
	m.HandleFunc("DELETE /workspace/file", h.wsDelete)
	m.HandleFunc("GET /workspace/stats", h.wsStats)
	m.HandleFunc("POST /workspace/gc", h.wsGC)
	m.HandleFunc("DELETE /workspace/delete-by-prefix", h.wsDeletePrefix)

	m.HandleFunc("POST /v1/op", h.op)
	m.HandleFunc("GET /v1/ops", h.opsHelp)
	m.HandleFunc("GET /v1/export", h.export)
	m.HandleFunc("POST /v1/import", h.importArchive)

	m.HandleFunc("GET /v1/runs/{run}", h.run)
	m.HandleFunc("GET /v1/runs/{run}/checkpoints", h.checkpoints)
	m.HandleFunc("GET /v1/runs/{run}/files", h.runFiles)
	m.HandleFunc("GET /v1/runs/{run}/file", h.runFile)
	m.HandleFunc("GET /v1/runs/{run}/diff", h.runDiff)
	m.HandleFunc("GET /v1/runs/{run}/events", h.events)
	m.HandleFunc("GET /v1/runs/{run}/events/follow", h.follow)

	m.HandleFunc("/", h.notFound)
}

// ServeHTTP serves one request: CORS, the access log, then the route.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	lw := &logWriter{ResponseWriter: w, status: http.StatusOK}
	h.answerWindow(lw)
	start := time.Now()
	if h.opts.AccessLog != nil {
		defer func() { h.logRequest(r, lw, start) }()
	}
	if h.cors(lw, r) {
		return
	}
	// The mux would redirect an unclean path (//, ./, ../) with an HTML
	// 307; every answer here is JSON, and no endpoint's path needs one.
	if p := r.URL.Path + "/"; strings.Contains(p, "//") || strings.Contains(p, "/./") || strings.Contains(p, "/../") {
		writeError(lw, badRequest("the path %q is not clean: no empty, \".\" or \"..\" segments", r.URL.Path))
		return
	}
	if err := h.checkQuery(r); err != nil {
		writeError(lw, err)
		return
	}
	if err := checkEncoding(r); err != nil {
		writeError(lw, err)
		return
	}
	h.mux.ServeHTTP(lw, r)
}

// checkEncoding refuses a request body in a content coding (gzip, br, …):
// the server decodes none, so an upload would store the encoded bytes as
// the file, and an op or archive would not read. "identity" is no coding.
func checkEncoding(r *http.Request) error {
	if r.ContentLength == 0 {
		return nil
	}
	for _, v := range r.Header.Values("Content-Encoding") {
		for _, c := range strings.Split(v, ",") {
			if c = strings.TrimSpace(c); c != "" && !strings.EqualFold(c, "identity") {
				return wserr.New(protocol.CodeUnsupportedEncoding, "http", "", "the body is sent with Content-Encoding %q, which this server does not decode: send it unencoded", c)
			}
		}
	}
	return nil
}

// changeParams are the query parameters each changing endpoint takes.
var changeParams = map[string][]string{
	"POST /workspace/upload":             {"actor", "path"},
	"DELETE /workspace/file":             {"actor", "path"},
	"POST /workspace/gc":                 {"actor", "keepVersions"},
	"DELETE /workspace/delete-by-prefix": {"actor", "prefix"},
	"POST /v1/op":                        {},
	"POST /v1/import":                    {},
}

// checkQuery refuses a query string that does not parse, which
// net/url's Query would read as if the pairs it cannot parse (a ";"
// separator, a bad "%" escape) were absent: a gc meant for one actor would
// then prune every actor's history. An endpoint that changes the store
// also refuses a parameter it does not take, so a misspelled one
// (keep=5) is not a default silently used, and one given twice.
func (h *Handler) checkQuery(r *http.Request) error {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return badRequest("the query string does not parse (%v): separate parameters with & and escape ; %% & + = in values", err)
	}
	_, pattern := h.mux.Handler(r)
	takes, changes := changeParams[pattern]
	if !changes {
		return nil
	}
	for _, k := range slices.Sorted(maps.Keys(q)) {
		switch {
		case !slices.Contains(takes, k) && len(takes) == 0:
			return badRequest("%s takes no query parameters (%q)", pattern, k)
		case !slices.Contains(takes, k):
			return badRequest("%s takes no query parameter %q (it takes %s)", pattern, k, strings.Join(takes, ", "))
		case len(q[k]) > 1:
			// Which one a handler reads is not for the client to guess:
			// actor=&actor=alice would read as every actor.
			return badRequest("query parameter %q given %d times: give it once", k, len(q[k]))
		}
	}
	return nil
}

func (h *Handler) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"ok": true})
}

// notFound answers a request no route took: 405 with Allow when its path
// is an endpoint's under other methods, else 404.
func (h *Handler) notFound(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodDelete} {
		other := *r
		other.Method = m
		if _, pattern := h.mux.Handler(&other); m != r.Method && pattern != "/" {
			allow = append(allow, m)
		}
	}
	if len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		writeError(w, wserr.New(protocol.CodeMethodNotAllowed, "http", "", "%s %s: this endpoint takes %s", r.Method, r.URL.Path, strings.Join(allow, ", ")))
		return
	}
	writeError(w, errNoRoute(r))
}
