package runs

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/journal"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// The run's runtime names (seed 000 §13): what the store keeps beside the
// model's workspace. The host reads them in HostScope; a profile can make
// none of them visible or writable to the model.
const (
	// ToolArgsRoot holds tool-args/<tool-call-id>.json, each call's
	// arguments as the host recorded them.
	ToolArgsRoot = "tool-args"
	// ToolResultsRoot holds tool-results/<tool-call-id>.json.
	ToolResultsRoot = "tool-results"
	// ModelResponsesRoot holds model-responses/round-NNN.json.
	ModelResponsesRoot = "model-responses"
	// CheckpointsRoot is where the host reads each checkpoint:
	// checkpoints/<checkpoint-id>/checkpoint.json and its files.
	CheckpointsRoot = "checkpoints"
	// EventsFile is the run's journal as JSON lines (events.jsonl).
	EventsFile = "events.jsonl"
	// ManifestFile is the run's manifest, readable in HostScope.
	ManifestFile = "manifest.json"
	// CheckpointFile is the name of a checkpoint's view below
	// checkpoints/<checkpoint-id>/.
	CheckpointFile = "checkpoint.json"
)

// ReservedRoots are the top-level names a profile may neither make visible
// nor writable: the run's inputs and its runtime records, hidden from the
// model even though the store holds them.
var ReservedRoots = []string{InputRoot, ToolArgsRoot, ToolResultsRoot, ModelResponsesRoot, CheckpointsRoot, EventsFile, ManifestFile}

// recordRoots are the reserved roots stored in the run's records tree.
var recordRoots = []string{ToolArgsRoot, ToolResultsRoot, ModelResponsesRoot}

func isRecordRoot(top string) bool {
	for _, r := range recordRoots {
		if r == top {
			return true
		}
	}
	return false
}

// ContextRecord is what RecordContext journals: the parts of the model's
// context, as context_assembled.
type ContextRecord struct {
	Sources  []journal.ContextSource `json:"sources"`
	Messages int                     `json:"messages,omitempty"`
	Tokens   int64                   `json:"tokens,omitempty"`
}

// ToolCallRecord is a tool call the model asked for.
type ToolCallRecord struct {
	// ID names the call; it becomes the file name tool-args/<ID>.json, so
	// it is one path segment (letters, digits, '_', '-', '.').
	ID string `json:"toolCallId"`
	// Name is the tool's canonical name, e.g. "workspace.write".
	Name string `json:"name"`
	// Round is the model round that asked for the call; 0: not given.
	Round int `json:"round,omitempty"`
	// Args are the arguments as the model sent them: any JSON value,
	// stored byte for byte.
	Args json.RawMessage `json:"args"`
}

// ToolResultRecord is the outcome of a recorded tool call.
type ToolResultRecord struct {
	ID   string `json:"toolCallId"`
	Name string `json:"name,omitempty"`
	// Result is what the model is given back: any JSON value, stored byte
	// for byte at tool-results/<ID>.json.
	Result json.RawMessage `json:"result"`
	// Error, when set, makes the record tool_call_failed: the
	// model-correctable error the result reports.
	Error *ToolError `json:"error,omitempty"`
}

// ToolError is a failed tool call's error as the model was told it.
type ToolError struct {
	Code    string `json:"code"`
	Message string `json:"message,omitempty"`
}

// ModelRequestRecord is round Round of the model loop, sent.
type ModelRequestRecord = journal.ModelRequest

// ModelResponseRecord is the model's answer to round Round.
type ModelResponseRecord struct {
	Round int `json:"round"`
	// Response is the provider's response as received: any JSON value,
	// stored byte for byte at model-responses/round-NNN.json.
	Response     json.RawMessage `json:"response"`
	FinishReason string          `json:"finishReason,omitempty"`
	InputTokens  int64           `json:"inputTokens,omitempty"`
	OutputTokens int64           `json:"outputTokens,omitempty"`
	ToolCallIDs  []string        `json:"toolCallIds,omitempty"`
}

// Recorded is what a record wrote: the file it stored (none for a context
// or a model request) and the seq of its last event.
type Recorded struct {
	Path vfs.Path `json:"path,omitzero"`
	Hash cas.Hash `json:"hash,omitzero"`
	Size int64    `json:"size,omitempty"`
	Seq  int64    `json:"seq"`
}

// RoundPath is where the response of model round round is stored:
// model-responses/round-001.json.
func RoundPath(round int) vfs.Path {
	return vfs.MustPath(fmt.Sprintf("%s/round-%03d.json", ModelResponsesRoot, round))
}

// recordPath is dir/<id>.json, failing with workspace.invalid_argument
// for an id that is not one path segment.
func recordPath(op, dir, id string) (vfs.Path, error) {
	if id == "" {
		return vfs.Path{}, wserr.New(wserr.InvalidArgument, op, "", "missing tool call id")
	}
	p, err := vfs.MustPath(dir).Join(id + ".json")
	if !runIDPattern.MatchString(id) || (err == nil && p.Dir().String() != dir) {
		return vfs.Path{}, wserr.New(wserr.InvalidArgument, op, "", "tool call id %q must be 1-128 letters, digits, '_', '-' or '.', starting with a letter or digit", id)
	}
	if err != nil {
		// Of that form, but no name a file may have on every system
		// (CON, NUL.txt and the like are devices on Windows).
		return vfs.Path{}, wserr.New(wserr.InvalidArgument, op, "", "tool call id %q names its record %s, which no file may be called: %s", id, id+".json", wserr.MessageOf(err))
	}
	return p, nil
}

// MaxRecordNameBytes is the longest name a record journals: a model, a
// tool's name, a finish reason, a failed call's error code, a context
// source, a tool call id a response names.
const MaxRecordNameBytes = 1024

// recordName fails with workspace.invalid_argument for a name of field
// longer than MaxRecordNameBytes.
func recordName(op, field, name string) error {
	if len(name) > MaxRecordNameBytes {
		return wserr.New(wserr.InvalidArgument, op, "", "%s of %d bytes: at most %d", field, len(name), MaxRecordNameBytes)
	}
	return nil
}

// jsonValue fails with workspace.invalid_argument unless b is one JSON
// value.
func jsonValue(op, field string, b json.RawMessage) error {
	if len(bytes.TrimSpace(b)) == 0 || !json.Valid(b) {
		return wserr.New(wserr.InvalidArgument, op, "", "%s must be a JSON value", field)
	}
	return nil
}

// RecordContext journals context_assembled for an active run. It fails
// with workspace.invalid_argument for a negative count or a source without
// a name, run.not_found, or run.invalid_transition for a run that is not
// running, awaiting approval or paused, and writes nothing then.
func (s *Service) RecordContext(ctx context.Context, runID string, c ContextRecord) (Recorded, error) {
	if c.Sources == nil {
		c.Sources = []journal.ContextSource{}
	}
	if c.Messages < 0 || c.Tokens < 0 {
		return Recorded{}, wserr.New(wserr.InvalidArgument, "record context", "", "messages and tokens must not be negative")
	}
	for _, src := range c.Sources {
		if src.Name == "" {
			return Recorded{}, wserr.New(wserr.InvalidArgument, "record context", "", "a context source needs a name")
		}
		if err := recordName("record context", "a context source's name", src.Name); err != nil {
			return Recorded{}, err
		}
		if src.Bytes < 0 || src.Tokens < 0 {
			return Recorded{}, wserr.New(wserr.InvalidArgument, "record context", "", "source %q: bytes and tokens must not be negative", src.Name)
		}
	}
	return s.record(ctx, runID, "record context", func(tx *index.Tx, r *recorder) error {
		return r.event(journal.ContextAssembled, journal.ContextAssembledPayload(c))
	})
}

// RecordToolCall stores the call's arguments at tool-args/<id>.json and
// journals tool_call_requested, in one transaction, for an active run. It
// fails with workspace.invalid_argument for a bad id, arguments that are
// not JSON, a name over MaxRecordNameBytes, or an id already recorded; run.not_found;
// run.invalid_transition for a run that is not active; and
// workspace.size_limit_exceeded past the store's cap. A failure writes
// nothing.
func (s *Service) RecordToolCall(ctx context.Context, runID string, c ToolCallRecord) (Recorded, error) {
	const op = "record tool call"
	p, err := recordPath(op, ToolArgsRoot, c.ID)
	if err != nil {
		return Recorded{}, err
	}
	if c.Name == "" {
		return Recorded{}, wserr.New(wserr.InvalidArgument, op, "", "missing tool name")
	}
	if err := recordName(op, "the tool's name", c.Name); err != nil {
		return Recorded{}, err
	}
	if c.Round < 0 {
		return Recorded{}, wserr.New(wserr.InvalidArgument, op, "", "round must be 1 or more (0: not given), not %d", c.Round)
	}
	if err := jsonValue(op, "args", c.Args); err != nil {
		return Recorded{}, err
	}
	return s.record(ctx, runID, op, func(tx *index.Tx, r *recorder) error {
		if err := r.store(p, c.Args); err != nil {
			return err
		}
		return r.event(journal.ToolCallRequested, journal.ToolCall{ToolCallID: c.ID, Name: c.Name, Round: c.Round,
			Path: p.String(), Hash: r.out.Hash.String(), Bytes: r.out.Size})
	})
}

// RecordToolResult stores a recorded call's result at
// tool-results/<id>.json and journals tool_call_completed, or
// tool_call_failed when res.Error is set, in one transaction. It fails as
// RecordToolCall does, and with workspace.invalid_argument for a call
// that was never requested or already has its result.
func (s *Service) RecordToolResult(ctx context.Context, runID string, res ToolResultRecord) (Recorded, error) {
	const op = "record tool result"
	p, err := recordPath(op, ToolResultsRoot, res.ID)
	if err != nil {
		return Recorded{}, err
	}
	if err := jsonValue(op, "result", res.Result); err != nil {
		return Recorded{}, err
	}
	if res.Error != nil && res.Error.Code == "" {
		return Recorded{}, wserr.New(wserr.InvalidArgument, op, "", "a failed tool call's error needs a code")
	}
	if err := recordName(op, "the tool's name", res.Name); err != nil {
		return Recorded{}, err
	}
	if res.Error != nil {
		if err := recordName(op, "the error's code", res.Error.Code); err != nil {
			return Recorded{}, err
		}
	}
	args, _ := recordPath(op, ToolArgsRoot, res.ID)
	return s.record(ctx, runID, op, func(tx *index.Tx, r *recorder) error {
		if ok, err := r.has(args); err != nil || !ok {
			if err != nil {
				return err
			}
			return wserr.New(wserr.InvalidArgument, op, "", "no tool call %q was recorded in run %s", res.ID, runID)
		}
		if err := r.store(p, res.Result); err != nil {
			return err
		}
		pl := journal.ToolCall{ToolCallID: res.ID, Name: res.Name, Path: p.String(), Hash: r.out.Hash.String(), Bytes: r.out.Size}
		typ, level := journal.ToolCallCompleted, journal.Info
		if res.Error != nil {
			typ, level = journal.ToolCallFailed, journal.Warn
			pl.Code, pl.Message = res.Error.Code, res.Error.Message
		}
		r.level = level
		return r.event(typ, pl)
	})
}

// RecordModelRequest journals model_request_created for round req.Round
// (from 1) of an active run. It fails with workspace.invalid_argument for
// a round below 1, one already answered, a negative count or a model named
// in more than MaxRecordNameBytes, run.not_found and
// run.invalid_transition.
func (s *Service) RecordModelRequest(ctx context.Context, runID string, req ModelRequestRecord) (Recorded, error) {
	const op = "record model request"
	if req.Round < 1 {
		return Recorded{}, wserr.New(wserr.InvalidArgument, op, "", "round must be 1 or more, not %d", req.Round)
	}
	if req.Messages < 0 || req.Tools < 0 {
		return Recorded{}, wserr.New(wserr.InvalidArgument, op, "", "messages and tools must not be negative")
	}
	if err := recordName(op, "the model", req.Model); err != nil {
		return Recorded{}, err
	}
	return s.record(ctx, runID, op, func(tx *index.Tx, r *recorder) error {
		if ok, err := r.has(RoundPath(req.Round)); err != nil || ok {
			if err != nil {
				return err
			}
			return wserr.New(wserr.InvalidArgument, op, "", "round %d of run %s is already answered", req.Round, runID)
		}
		return r.event(journal.ModelRequestCreated, req)
	})
}

// RecordModelResponse stores the model's answer to round res.Round at
// model-responses/round-NNN.json and journals model_completed and
// model_response_stored, in one transaction. It fails with
// workspace.invalid_argument for a round below 1, one already stored, or a
// response that is not JSON, and as RecordToolCall does.
func (s *Service) RecordModelResponse(ctx context.Context, runID string, res ModelResponseRecord) (Recorded, error) {
	const op = "record model response"
	if res.Round < 1 {
		return Recorded{}, wserr.New(wserr.InvalidArgument, op, "", "round must be 1 or more, not %d", res.Round)
	}
	if res.InputTokens < 0 || res.OutputTokens < 0 {
		return Recorded{}, wserr.New(wserr.InvalidArgument, op, "", "token counts must not be negative")
	}
	if err := recordName(op, "the finish reason", res.FinishReason); err != nil {
		return Recorded{}, err
	}
	for _, id := range res.ToolCallIDs {
		if err := recordName(op, "a tool call id", id); err != nil {
			return Recorded{}, err
		}
	}
	if err := jsonValue(op, "response", res.Response); err != nil {
		return Recorded{}, err
	}
	p := RoundPath(res.Round)
	return s.record(ctx, runID, op, func(tx *index.Tx, r *recorder) error {
		if err := r.store(p, res.Response); err != nil {
			return err
		}
		if err := r.event(journal.ModelCompleted, journal.ModelDone{Round: res.Round, FinishReason: res.FinishReason,
			InputTokens: res.InputTokens, OutputTokens: res.OutputTokens, ToolCallIDs: res.ToolCallIDs}); err != nil {
			return err
		}
		return r.event(journal.ModelResponseStored, journal.RecordStored{Round: res.Round, Path: p.String(), Hash: r.out.Hash.String(), Bytes: r.out.Size})
	})
}

// recorder is one record's transaction: the run, its records tree as the
// record changes it, and what it stored.
type recorder struct {
	s     *Service
	ctx   context.Context
	tx    *index.Tx
	op    string
	run   Run
	root  cas.Hash
	level journal.Level
	out   Recorded
	// room holds the record to the store's cap.
	room *room
}

// has reports whether the records tree holds p; a tree it cannot read
// (store.corrupt, the context's end) is an error, never "no".
func (r *recorder) has(p vfs.Path) (bool, error) {
	_, err := r.s.trees.Lookup(r.ctx, r.tx, r.root, p)
	if wserr.Is(err, wserr.FileNotFound) {
		return false, nil
	}
	return err == nil, err
}

// store puts b at p in the records tree; p must not exist yet.
func (r *recorder) store(p vfs.Path, b []byte) error {
	if ok, err := r.has(p); err != nil || ok {
		if err != nil {
			return err
		}
		return wserr.New(wserr.InvalidArgument, r.op, p.String(), "%s is already recorded in run %s", p, r.run.ID)
	}
	if err := r.room.add(p, int64(len(b))); err != nil {
		return err
	}
	h, err := r.s.blobs.PutBytes(r.ctx, r.tx, b)
	if err != nil {
		return err
	}
	if r.root, err = r.s.trees.Set(r.ctx, r.tx, r.root, p, &vfs.Entry{Kind: vfs.KindFile, Hash: h, Size: int64(len(b))}); err != nil {
		return err
	}
	r.out.Path, r.out.Hash, r.out.Size = p, h, int64(len(b))
	return nil
}

func (r *recorder) event(typ journal.Type, payload any) error {
	ev, err := r.s.journal.Append(r.ctx, r.tx, r.run.ID, typ, r.level, payload)
	if err != nil {
		return err
	}
	r.out.Seq = ev.Seq
	return nil
}

// record runs fn in one transaction for an active run and, if fn changed
// the records tree, stores its new root on the run's row.
func (s *Service) record(ctx context.Context, runID, op string, fn func(tx *index.Tx, r *recorder) error) (Recorded, error) {
	var out Recorded
	err := s.UpdateInRoom(ctx, func(tx *index.Tx) error {
		run, caps, err := findRunCaps(ctx, tx, runID) // the store's cap with the run
		if err != nil {
			return err
		}
		if !run.Status.Active() {
			return wserr.New(wserr.InvalidState, op, "", "run %s is %s: only running, awaiting_approval or paused runs take records", runID, run.Status)
		}
		r := &recorder{s: s, ctx: ctx, tx: tx, op: op, run: run, root: run.Records, level: journal.Info, room: s.roomCheck(ctx, tx, op, &caps)}
		r.room.grow()
		if r.root.IsZero() {
			if r.root, err = s.trees.Put(ctx, tx, nil); err != nil {
				return err
			}
		}
		start := r.root
		if err := fn(tx, r); err != nil {
			return err
		}
		if r.root != start {
			if _, err := tx.ExecContext(ctx, `UPDATE runs SET records = ?, updated_at = ? WHERE id = ?`, r.root, s.now().UnixNano(), runID); err != nil {
				return index.Translate(err)
			}
			// Nothing else holds a records tree: the one replaced is
			// garbage.
			if err := s.trees.Orphaned(ctx, tx, start); err != nil {
				return err
			}
		}
		out = r.out
		return r.room.settle(ctx, tx)
	})
	return out, err
}
