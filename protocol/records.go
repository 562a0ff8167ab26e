package protocol

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/wsstore/wsstore/journal"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/wserr"
)

// Recorder is what the record ops ask of the store's runs: the host's
// records of a run's steps (seed 002's timeline); *runs.Service
// implements it.
type Recorder interface {
	RecordContext(ctx context.Context, runID string, c runs.ContextRecord) (runs.Recorded, error)
	RecordToolCall(ctx context.Context, runID string, c runs.ToolCallRecord) (runs.Recorded, error)
	RecordToolResult(ctx context.Context, runID string, r runs.ToolResultRecord) (runs.Recorded, error)
	RecordModelRequest(ctx context.Context, runID string, r runs.ModelRequestRecord) (runs.Recorded, error)
	RecordModelResponse(ctx context.Context, runID string, r runs.ModelResponseRecord) (runs.Recorded, error)
}

// recordOps are the ops by which the host records what happened in a run
// beside its workspace: context, model rounds and tool calls.
var recordOps = []op{
	{
		name: "context.assembled", access: writes, request: []any{contextRequest{}, journal.ContextSource{}}, handle: (*Session).contextAssembled,
		help: `  context.assembled {sources?: [{name, bytes?, tokens?}], messages?, tokens?}  -> {seq}
              journals context_assembled: what the model's context holds`,
	},
	{
		name: "model.request", access: writes, request: []any{modelRequestRequest{}}, handle: (*Session).modelRequest,
		help: `  model.request {round, model?, messages?, tools?}  -> {seq}
              messages and tools: counts, not the lists.
              journals model_request_created for round (from 1); a round
              may be requested again (a retry) until it is answered`,
	},
	{
		name: "model.response", access: writes, request: []any{modelResponseRequest{}}, handle: (*Session).modelResponse,
		help: `  model.response {round, response, finishReason?, inputTokens?, outputTokens?, toolCallIds?}
              -> {path, hash, size, seq}
              stores response (any JSON, byte for byte) at
              model-responses/round-NNN.json and journals model_completed
              and model_response_stored`,
	},
	{
		name: "tool.call", access: writes, request: []any{toolCallRequest{}}, handle: (*Session).toolCall,
		help: `  tool.call   {toolCallId, name, args, round?}  -> {path, hash, size, seq}
              stores args (any JSON, byte for byte) at
              tool-args/<toolCallId>.json and journals tool_call_requested`,
	},
	{
		name: "tool.result", access: writes, request: []any{toolResultRequest{}, runs.ToolError{}}, handle: (*Session).toolResult,
		help: `  tool.result {toolCallId, result, name?, error?: {code, message?}}
              -> {path, hash, size, seq}
              stores result at tool-results/<toolCallId>.json and journals
              tool_call_completed, or tool_call_failed when error is given.
      The record ops act only on a run that is running, awaiting approval or
      paused (run.not_found, run.invalid_transition otherwise); each stores
      its file and its events in one transaction, or nothing. The files are
      hidden from the model; read them with read in the host's view
      (wsctl cat RUN tool-args/ID.json). A repeated tool call id, a round
      answered already (model.request or model.response), or a result for
      a call never recorded is workspace.invalid_argument`,
	},
}

func init() {
	ops = append(ops, recordOps...)
	for i := range ops {
		opsByName[ops[i].name] = &ops[i]
	}
}

func (s *Session) recorder() (Recorder, error) {
	if s.backend.Records == nil {
		return nil, wserr.New(wserr.InvalidOptions, "record", "", "this session records nothing")
	}
	return s.backend.Records, nil
}

type contextRequest struct {
	base
	Sources  []journal.ContextSource `json:"sources"`
	Messages int                     `json:"messages"`
	Tokens   int64                   `json:"tokens"`
}

func (s *Session) contextAssembled(ctx context.Context, r request) (any, error) {
	req, runID, err := decodeForRun[contextRequest](s, r)
	if err != nil {
		return nil, err
	}
	rec, err := s.recorder()
	if err != nil {
		return nil, err
	}
	res, err := rec.RecordContext(ctx, runID, runs.ContextRecord{Sources: req.Sources, Messages: req.Messages, Tokens: req.Tokens})
	if err != nil {
		return nil, err
	}
	return map[string]any{"seq": res.Seq}, nil
}

type modelRequestRequest struct {
	base
	Round    *int   `json:"round"`
	Model    string `json:"model"`
	Messages int    `json:"messages"`
	Tools    int    `json:"tools"`
}

func (s *Session) modelRequest(ctx context.Context, r request) (any, error) {
	req, runID, err := decodeForRun[modelRequestRequest](s, r)
	if err != nil {
		return nil, err
	}
	if req.Round == nil {
		return nil, invalidRequest("missing \"round\"")
	}
	rec, err := s.recorder()
	if err != nil {
		return nil, err
	}
	res, err := rec.RecordModelRequest(ctx, runID, runs.ModelRequestRecord{Round: *req.Round, Model: req.Model, Messages: req.Messages, Tools: req.Tools})
	if err != nil {
		return nil, err
	}
	return map[string]any{"seq": res.Seq}, nil
}

type modelResponseRequest struct {
	base
	Round        *int            `json:"round"`
	Response     json.RawMessage `json:"response"`
	FinishReason string          `json:"finishReason"`
	InputTokens  int64           `json:"inputTokens"`
	OutputTokens int64           `json:"outputTokens"`
	ToolCallIDs  []string        `json:"toolCallIds"`
}

// recordedResult is the answer to a record that stored a file.
type recordedResult struct {
	Path string `json:"path"`
	Hash string `json:"hash"`
	Size int64  `json:"size"`
	Seq  int64  `json:"seq"`
}

func recorded(r runs.Recorded) recordedResult {
	return recordedResult{Path: r.Path.String(), Hash: r.Hash.String(), Size: r.Size, Seq: r.Seq}
}

func (s *Session) modelResponse(ctx context.Context, r request) (any, error) {
	req, runID, err := decodeForRun[modelResponseRequest](s, r)
	if err != nil {
		return nil, err
	}
	if req.Round == nil {
		return nil, invalidRequest("missing \"round\"")
	}
	if absent(req.Response) {
		return nil, invalidRequest("missing \"response\"")
	}
	rec, err := s.recorder()
	if err != nil {
		return nil, err
	}
	res, err := rec.RecordModelResponse(ctx, runID, runs.ModelResponseRecord{Round: *req.Round, Response: req.Response,
		FinishReason: req.FinishReason, InputTokens: req.InputTokens, OutputTokens: req.OutputTokens, ToolCallIDs: req.ToolCallIDs})
	if err != nil {
		return nil, err
	}
	return recorded(res), nil
}

type toolCallRequest struct {
	base
	ToolCallID *string         `json:"toolCallId"`
	Name       *string         `json:"name"`
	Args       json.RawMessage `json:"args"`
	Round      int             `json:"round"`
}

func (s *Session) toolCall(ctx context.Context, r request) (any, error) {
	req, runID, err := decodeForRun[toolCallRequest](s, r)
	if err != nil {
		return nil, err
	}
	switch {
	case req.ToolCallID == nil:
		return nil, invalidRequest("missing \"toolCallId\"")
	case req.Name == nil:
		return nil, invalidRequest("missing \"name\"")
	case absent(req.Args):
		return nil, invalidRequest("missing \"args\"")
	}
	rec, err := s.recorder()
	if err != nil {
		return nil, err
	}
	res, err := rec.RecordToolCall(ctx, runID, runs.ToolCallRecord{ID: *req.ToolCallID, Name: *req.Name, Round: req.Round, Args: req.Args})
	if err != nil {
		return nil, err
	}
	return recorded(res), nil
}

type toolResultRequest struct {
	base
	ToolCallID *string         `json:"toolCallId"`
	Name       string          `json:"name"`
	Result     json.RawMessage `json:"result"`
	Error      *runs.ToolError `json:"error"`
}

func (s *Session) toolResult(ctx context.Context, r request) (any, error) {
	req, runID, err := decodeForRun[toolResultRequest](s, r)
	if err != nil {
		return nil, err
	}
	switch {
	case req.ToolCallID == nil:
		return nil, invalidRequest("missing \"toolCallId\"")
	case absent(req.Result):
		return nil, invalidRequest("missing \"result\"")
	}
	rec, err := s.recorder()
	if err != nil {
		return nil, err
	}
	res, err := rec.RecordToolResult(ctx, runID, runs.ToolResultRecord{ID: *req.ToolCallID, Name: req.Name, Result: req.Result, Error: req.Error})
	if err != nil {
		return nil, err
	}
	return recorded(res), nil
}

// absent reports whether a raw JSON field was left out or given as null,
// which counts as absent.
func absent(raw json.RawMessage) bool {
	return raw == nil || string(bytes.TrimSpace(raw)) == "null"
}
