package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"unicode/utf8"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/checkpoint"
	"github.com/wsstore/wsstore/journal"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// batchSession is the state of one batch: the store and the run that later
// requests act on by default.
type batchSession struct {
	svc     *runs.Service
	journal *journal.Journal
	current string // the run the last run.create created
}

// batchOp handles one request: it decodes line into its own request type
// and returns the result object.
type batchOp func(b *batchSession, ctx context.Context, line []byte) (any, error)

// batchOps are the operations by name.
var batchOps = map[string]batchOp{
	"run.create":   (*batchSession).runCreate,
	"write":        (*batchSession).write,
	"append":       (*batchSession).append,
	"patch":        (*batchSession).patch,
	"delete":       (*batchSession).delete,
	"read":         (*batchSession).read,
	"list":         (*batchSession).list,
	"checkpoint":   (*batchSession).checkpoint,
	"rollback":     (*batchSession).rollback,
	"diff":         (*batchSession).diff,
	"commit":       (*batchSession).commit,
	"finish":       (*batchSession).finish,
	"events":       (*batchSession).events,
	"manifest.set": (*batchSession).manifestSet,
	"run.status":   (*batchSession).runStatus,
}

// handle answers one request line. It never panics: a panic in an
// operation becomes a store.internal response, so one bad request cannot
// end the batch.
func (b *batchSession) handle(ctx context.Context, line []byte) (resp batchResponse) {
	if len(bytes.TrimSpace(line)) == 0 {
		return errorResponse("", nil, wserr.New(codeInvalidJSON, "", "", "empty line: every line must hold one JSON request object"))
	}
	if !utf8.Valid(line) {
		// encoding/json would replace the bad bytes with U+FFFD, changing
		// paths and content; JSON text is UTF-8.
		return errorResponse("", nil, wserr.New(codeInvalidJSON, "", "", "the line is not valid UTF-8 (at byte %d)", invalidUTF8At(line)))
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(line, &fields); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) || !json.Valid(line) {
			return errorResponse("", nil, wserr.New(codeInvalidJSON, "", "", "%s", jsonMessage(err)))
		}
		return errorResponse("", nil, wserr.New(codeInvalidRequest, "", "", "a request must be a JSON object with an \"op\""))
	}
	id := fields["id"]
	// Keys given twice and lone surrogates, anywhere in the line, before
	// op is trusted: {"op":"write","op":"delete"} must not run a delete.
	if err := checkJSON(line, nil, ""); err != nil {
		return refuse(fields, id, err)
	}
	rawOp, ok := fields["op"]
	if !ok {
		return errorResponse("", id, wserr.New(codeInvalidRequest, "", "", "missing \"op\""))
	}
	var op string
	if err := json.Unmarshal(rawOp, &op); err != nil || string(rawOp) == "null" {
		return errorResponse("", id, wserr.New(codeInvalidRequest, "", "", "\"op\" must be a string"))
	}
	h, ok := batchOps[op]
	if !ok {
		return errorResponse(op, id, wserr.New(codeUnknownOp, "", "", "unknown op %q (batch --help lists them)", op))
	}
	defer func() {
		if r := recover(); r != nil {
			resp = errorResponse(op, id, wserr.New(wserr.Internal, op, "", "panic: %v", r))
		}
	}()
	result, err := h(b, ctx, line)
	if err != nil {
		var fe *fieldError
		if errors.As(err, &fe) && fe.inField("id") {
			id = nil
		}
		if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
			err = errInterrupted("the request was stopped before it was done")
		}
		return errorResponse(op, id, err)
	}
	return batchResponse{Op: op, ID: id, OK: true, Result: result}
}

// refuse answers a line checkJSON refused. The answer names the op unless
// the op is what is wrong, and echoes the id unless the id is.
func refuse(fields map[string]json.RawMessage, id json.RawMessage, err error) batchResponse {
	var fe *fieldError
	if !errors.As(err, &fe) {
		return errorResponse("", nil, wserr.Wrap(codeInvalidJSON, "", "", err))
	}
	var op string
	if !fe.inField("op") {
		json.Unmarshal(fields["op"], &op) // not a string: op stays ""
	}
	if fe.inField("id") {
		id = nil
	}
	return errorResponse(op, id, wserr.New(codeInvalidRequest, "", "", "%s", fe.Msg))
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

// jsonMessage drops encoding/json's "json: " prefix.
func jsonMessage(err error) string {
	return strings.TrimPrefix(err.Error(), "json: ")
}

func invalidRequest(format string, args ...any) error {
	return wserr.New(codeInvalidRequest, "", "", format, args...)
}

// decode reads line into req strictly: a field name that is not req's
// (spelled exactly), a key given twice, a lone surrogate escape or a value
// of the wrong type is batch.invalid_request naming the field.
func decode(line []byte, req any) error {
	if err := checkJSON(line, reflect.TypeOf(req), ""); err != nil {
		var fe *fieldError
		if errors.As(err, &fe) {
			return wserr.Wrap(codeInvalidRequest, "", "", fe)
		}
		return invalidRequest("%s", jsonMessage(err))
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(req); err != nil {
		var we *wserr.Error
		if errors.As(err, &we) {
			return err // from a field's own UnmarshalJSON
		}
		return invalidRequest("%s", jsonMessage(err))
	}
	return nil
}

// base holds the fields every request may carry.
type base struct {
	Op    string          `json:"op"`
	ID    json.RawMessage `json:"id"`
	RunID string          `json:"runId"`
}

// runRequest is a request that may name the run it acts on.
type runRequest interface{ runBase() base }

func (r base) runBase() base { return r }

// decodeForRun decodes a request line into a T and resolves the run it
// acts on.
func decodeForRun[T runRequest](b *batchSession, line []byte) (T, string, error) {
	var req T
	if err := decode(line, &req); err != nil {
		return req, "", err
	}
	runID, err := b.run(req.runBase())
	return req, runID, err
}

// run returns the run a request acts on.
func (b *batchSession) run(req base) (string, error) {
	if req.RunID != "" {
		return req.RunID, nil
	}
	if b.current == "" {
		return "", invalidRequest("no run: send run.create first, or name \"runId\"")
	}
	return b.current, nil
}

// ckptRef is a checkpoint given as "cp_000003", "3" or 3.
type ckptRef struct {
	seq  int64
	live bool // "live": the live workspace (diff's to)
}

func (c *ckptRef) UnmarshalJSON(b []byte) error {
	var n int64
	if err := json.Unmarshal(b, &n); err == nil {
		if n < 1 {
			return invalidRequest("checkpoint %d: checkpoints count from 1", n)
		}
		c.seq = n
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return invalidRequest("a checkpoint is \"cp_000003\" or a number")
	}
	if strings.EqualFold(s, "live") {
		c.live = true
		return nil
	}
	seq, err := checkpoint.ParseRef(s)
	if err != nil {
		return err
	}
	c.seq = seq
	return nil
}

// ---- run.create

type createRequest struct {
	base
	Chat    *runs.ChatKey     `json:"chat"`
	ChatRef json.RawMessage   `json:"chatRef"`
	Profile *runs.Profile     `json:"profile"`
	Inputs  map[string]string `json:"inputs"`
}

func (b *batchSession) runCreate(ctx context.Context, line []byte) (any, error) {
	var req createRequest
	if err := decode(line, &req); err != nil {
		return nil, err
	}
	if req.Chat == nil {
		return nil, invalidRequest("missing \"chat\": {kind, stableChatId}")
	}
	if req.Chat.Kind == "" {
		return nil, invalidRequest("missing \"chat.kind\"")
	}
	if req.Chat.StableChatID == "" {
		return nil, invalidRequest("missing \"chat.stableChatId\"")
	}
	inputs := make(map[string][]byte, len(req.Inputs))
	for k, v := range req.Inputs {
		inputs[k] = []byte(v)
	}
	run, err := b.svc.CreateRun(ctx, runs.CreateRequest{Chat: *req.Chat, ChatRef: req.ChatRef, RunID: req.RunID, Profile: req.Profile, Inputs: inputs})
	if err != nil {
		return nil, err
	}
	b.current = run.ID
	return map[string]any{"runId": run.ID, "workspaceId": run.ChatID}, nil
}

// ---- write, append, patch, delete

type writeRequest struct {
	base
	Path          *string `json:"path"`
	Content       *string `json:"content"`
	ContentBase64 *string `json:"contentBase64"`
	ExpectedHash  string  `json:"expectedHash"`
}

// writeResult is the answer to a workspace change.
type writeResult struct {
	Path         string   `json:"path"`
	Hash         cas.Hash `json:"hash,omitzero"`
	Size         *int64   `json:"size,omitempty"`
	CheckpointID string   `json:"checkpointId,omitempty"`
}

func (b *batchSession) write(ctx context.Context, line []byte) (any, error) {
	return b.writeMode(ctx, line, vfs.Replace)
}

func (b *batchSession) append(ctx context.Context, line []byte) (any, error) {
	return b.writeMode(ctx, line, vfs.Append)
}

func (b *batchSession) writeMode(ctx context.Context, line []byte, mode vfs.WriteMode) (any, error) {
	req, runID, err := decodeForRun[writeRequest](b, line)
	if err != nil {
		return nil, err
	}
	p, err := requiredPath(req.Path)
	if err != nil {
		return nil, err
	}
	var content []byte
	switch {
	case (req.Content == nil) == (req.ContentBase64 == nil):
		return nil, invalidRequest("give exactly one of \"content\" and \"contentBase64\"")
	case req.Content != nil:
		content = []byte(*req.Content)
	default:
		if content, err = base64.StdEncoding.DecodeString(*req.ContentBase64); err != nil {
			return nil, invalidRequest("contentBase64: %v", err)
		}
	}
	expected, err := optionalHash(req.ExpectedHash)
	if err != nil {
		return nil, err
	}
	fi, err := b.svc.Workspace(runID, runs.ModelScope).Write(ctx, p, content, vfs.WriteOptions{Mode: mode, ExpectedHash: expected})
	if err != nil {
		return nil, err
	}
	return b.changed(ctx, runID, fi)
}

type patchRequest struct {
	base
	Path         *string `json:"path"`
	Old          *string `json:"old"`
	New          *string `json:"new"`
	ReplaceAll   bool    `json:"replaceAll"`
	ExpectedHash string  `json:"expectedHash"`
}

func (b *batchSession) patch(ctx context.Context, line []byte) (any, error) {
	req, runID, err := decodeForRun[patchRequest](b, line)
	if err != nil {
		return nil, err
	}
	p, err := requiredPath(req.Path)
	if err != nil {
		return nil, err
	}
	if req.Old == nil || req.New == nil {
		return nil, invalidRequest("patch needs \"old\" and \"new\"")
	}
	expected, err := optionalHash(req.ExpectedHash)
	if err != nil {
		return nil, err
	}
	fi, err := b.svc.Workspace(runID, runs.ModelScope).Patch(ctx, p, *req.Old, *req.New, vfs.PatchOptions{ReplaceAll: req.ReplaceAll, ExpectedHash: expected})
	if err != nil {
		return nil, err
	}
	return b.changed(ctx, runID, fi)
}

type pathRequest struct {
	base
	Path *string `json:"path"`
}

func (b *batchSession) delete(ctx context.Context, line []byte) (any, error) {
	req, runID, err := decodeForRun[pathRequest](b, line)
	if err != nil {
		return nil, err
	}
	p, err := requiredPath(req.Path)
	if err != nil {
		return nil, err
	}
	fi, err := b.svc.Workspace(runID, runs.ModelScope).Delete(ctx, p)
	if err != nil {
		return nil, err
	}
	res, err := b.changed(ctx, runID, fi)
	if err != nil {
		return nil, err
	}
	res.Size = nil
	return res, nil
}

// changed builds the answer to a committed change, naming the automatic
// checkpoint the change took, if any.
func (b *batchSession) changed(ctx context.Context, runID string, fi vfs.FileInfo) (writeResult, error) {
	size := fi.Size
	return writeResult{Path: fi.Path.String(), Hash: fi.Hash, Size: &size, CheckpointID: fi.Checkpoint}, nil
}

func requiredPath(s *string) (vfs.Path, error) {
	if s == nil {
		return vfs.Path{}, invalidRequest("missing \"path\"")
	}
	return vfs.ParsePath(*s)
}

func optionalHash(s string) (cas.Hash, error) {
	if s == "" {
		return cas.Hash{}, nil
	}
	h, err := cas.ParseHash(s)
	if err == nil && h.IsZero() {
		// The zero hash means "no guard" to the store: a host that sends
		// it must not get a write that checks nothing.
		return h, invalidRequest("field \"expectedHash\" is the zero hash, which names no content: leave the field out to write unguarded")
	}
	return h, err
}

// ---- read, list

type readRequest struct {
	base
	Path      *string  `json:"path"`
	At        *ckptRef `json:"at"`
	StartLine int      `json:"startLine"`
	EndLine   int      `json:"endLine"`
}

type readResult struct {
	fileContent
	TotalLines int  `json:"totalLines,omitempty"`
	StartLine  int  `json:"startLine,omitempty"`
	EndLine    int  `json:"endLine,omitempty"`
	Truncated  bool `json:"truncated,omitempty"`
}

// modelView returns the agent's view of a run, live or at a checkpoint.
func (b *batchSession) modelView(runID string, at *ckptRef) *runs.Workspace {
	if at == nil || at.live {
		return b.svc.Workspace(runID, runs.ModelScope)
	}
	return b.svc.WorkspaceAt(runID, at.seq, runs.ModelScope)
}

func (b *batchSession) read(ctx context.Context, line []byte) (any, error) {
	req, runID, err := decodeForRun[readRequest](b, line)
	if err != nil {
		return nil, err
	}
	p, err := requiredPath(req.Path)
	if err != nil {
		return nil, err
	}
	res, err := b.modelView(runID, req.At).Read(ctx, p, vfs.ReadOptions{StartLine: req.StartLine, EndLine: req.EndLine})
	if err != nil {
		return nil, err
	}
	out := readResult{fileContent: newFileContent(p, res.Info.Hash, res.Content), TotalLines: res.TotalLines}
	out.Size = res.Info.Size
	if req.StartLine != 0 || req.EndLine != 0 {
		out.StartLine, out.EndLine, out.Truncated = res.StartLine, res.EndLine, res.Truncated
	}
	return out, nil
}

type listRequest struct {
	base
	Path  *string  `json:"path"`
	Depth int      `json:"depth"`
	At    *ckptRef `json:"at"`
}

func (b *batchSession) list(ctx context.Context, line []byte) (any, error) {
	req, runID, err := decodeForRun[listRequest](b, line)
	if err != nil {
		return nil, err
	}
	p := vfs.Root()
	if req.Path != nil && *req.Path != "" && *req.Path != "." {
		if p, err = vfs.ParsePath(*req.Path); err != nil {
			return nil, err
		}
	}
	if req.Depth < 0 {
		return nil, wserr.New(wserr.InvalidArgument, "list", "", "depth must not be negative")
	}
	entries, err := b.modelView(runID, req.At).List(ctx, p, req.Depth)
	if err != nil {
		return nil, err
	}
	if entries == nil {
		entries = []vfs.FileInfo{}
	}
	return map[string]any{"entries": entries}, nil
}

// ---- checkpoint, rollback, diff

type checkpointRequest struct {
	base
	Reason string `json:"reason"`
}

func (b *batchSession) checkpoint(ctx context.Context, line []byte) (any, error) {
	req, runID, err := decodeForRun[checkpointRequest](b, line)
	if err != nil {
		return nil, err
	}
	cp, err := b.svc.Checkpoint(ctx, runID, req.Reason)
	if err != nil {
		return nil, err
	}
	return map[string]any{"checkpointId": cp.ID, "seq": cp.Seq}, nil
}

type rollbackRequest struct {
	base
	CheckpointID  *ckptRef `json:"checkpointId"`
	CheckpointSeq *int64   `json:"checkpointSeq"`
	Pause         bool     `json:"pause"`
}

func (b *batchSession) rollback(ctx context.Context, line []byte) (any, error) {
	req, runID, err := decodeForRun[rollbackRequest](b, line)
	if err != nil {
		return nil, err
	}
	var seq int64
	switch {
	case (req.CheckpointID == nil) == (req.CheckpointSeq == nil):
		return nil, invalidRequest("give exactly one of \"checkpointId\" and \"checkpointSeq\"")
	case req.CheckpointID != nil:
		if req.CheckpointID.live {
			return nil, invalidRequest("rollback needs a checkpoint, not live")
		}
		seq = req.CheckpointID.seq
	default:
		seq = *req.CheckpointSeq
	}
	run, err := b.svc.Rollback(ctx, runID, seq, runs.RollbackOptions{Pause: req.Pause})
	if err != nil {
		return nil, err
	}
	return map[string]any{"runId": run.ID, "root": run.Root, "checkpointId": checkpoint.ID(seq), "status": run.Status}, nil
}

type diffRequest struct {
	base
	From *ckptRef `json:"from"`
	To   *ckptRef `json:"to"`
}

func (b *batchSession) diff(ctx context.Context, line []byte) (any, error) {
	req, runID, err := decodeForRun[diffRequest](b, line)
	if err != nil {
		return nil, err
	}
	if req.From == nil || req.From.live {
		return nil, invalidRequest("diff needs \"from\": a checkpoint")
	}
	var to int64
	if req.To != nil && !req.To.live {
		to = req.To.seq
	}
	changes, err := b.svc.Diff(ctx, runID, req.From.seq, to)
	if err != nil {
		return nil, err
	}
	return map[string]any{"changes": gitHeaders(changes)}, nil
}

// ---- commit, finish, events, manifest.set, run.status

type commitRequest struct {
	base
	Path string          `json:"path"`
	Mode runs.CommitMode `json:"mode"`
}

func (b *batchSession) commit(ctx context.Context, line []byte) (any, error) {
	req, runID, err := decodeForRun[commitRequest](b, line)
	if err != nil {
		return nil, err
	}
	// batch has no chat: the sink accepts the message, which the response
	// delivers to the host.
	var delivered *runs.Message
	sink := runs.SinkFunc(func(_ context.Context, cr runs.CommitRequest) (json.RawMessage, error) {
		m := cr.Message
		delivered = &m
		return json.RawMessage(`{"deliveredIn":"batch response"}`), nil
	})
	rec, err := b.svc.Commit(ctx, runID, sink, runs.CommitOptions{Mode: req.Mode, Path: req.Path})
	if err != nil {
		return nil, err
	}
	msg := rec.Message
	if delivered != nil {
		msg = *delivered
	}
	return map[string]any{"commitId": rec.ID, "checkpointId": rec.CheckpointID, "mode": rec.Mode, "message": msg}, nil
}

func (b *batchSession) finish(ctx context.Context, line []byte) (any, error) {
	var req base
	if err := decode(line, &req); err != nil {
		return nil, err
	}
	runID, err := b.run(req)
	if err != nil {
		return nil, err
	}
	res, err := b.svc.Finish(ctx, runID)
	if err != nil {
		return nil, err
	}
	return map[string]any{"runId": res.Run.ID, "status": res.Run.Status, "persistChanges": res.PersistChanges,
		"persistVersion": res.PersistVersion, "merged": res.Merged}, nil
}

type eventsRequest struct {
	base
	AfterSeq int64 `json:"afterSeq"`
	Limit    int   `json:"limit"`
}

func (b *batchSession) events(ctx context.Context, line []byte) (any, error) {
	req, runID, err := decodeForRun[eventsRequest](b, line)
	if err != nil {
		return nil, err
	}
	if _, err := b.svc.Run(ctx, runID); err != nil {
		return nil, err
	}
	evs, err := b.journal.Page(ctx, runID, journal.PageQuery{AfterSeq: req.AfterSeq, Limit: req.Limit})
	if err != nil {
		return nil, err
	}
	return map[string]any{"events": evs}, nil
}

type manifestRequest struct {
	base
	Manifest json.RawMessage `json:"manifest"`
}

func (b *batchSession) manifestSet(ctx context.Context, line []byte) (any, error) {
	req, runID, err := decodeForRun[manifestRequest](b, line)
	if err != nil {
		return nil, err
	}
	if len(req.Manifest) == 0 || string(req.Manifest) == "null" {
		return nil, invalidRequest("missing \"manifest\"")
	}
	if err := checkJSON(req.Manifest, reflect.TypeFor[runs.Manifest](), "manifest"); err != nil {
		return nil, wserr.Wrap(wserr.InvalidManifest, "manifest", "", err)
	}
	m, err := runs.ParseManifest(req.Manifest)
	if err != nil {
		return nil, err
	}
	if err := b.svc.SetManifest(ctx, runID, m); err != nil {
		return nil, err
	}
	return map[string]any{"artifacts": len(m.Artifacts)}, nil
}

type statusRequest struct {
	base
	Status *runs.Status `json:"status"`
	Reason string       `json:"reason"`
}

func (b *batchSession) runStatus(ctx context.Context, line []byte) (any, error) {
	req, runID, err := decodeForRun[statusRequest](b, line)
	if err != nil {
		return nil, err
	}
	if req.Status == nil {
		return nil, invalidRequest("missing \"status\"")
	}
	if err := b.svc.SetStatus(ctx, runID, *req.Status, req.Reason); err != nil {
		return nil, err
	}
	return map[string]any{"runId": runID, "status": *req.Status}, nil
}
