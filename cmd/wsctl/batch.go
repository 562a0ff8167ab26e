package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/wsstore/wsstore/wserr"
)

const batchLong = `batch is the way in for hosts written in other languages: it reads JSON
requests from standard input, one per line, and writes exactly one JSON
response line per request line to standard output, in order. Each response
is written and flushed as soon as its request is handled, so a host may
send one request and wait for its answer before sending the next. A
response with "ok": true is sent only after the change is committed.
The store is created if it does not exist. batch exits 0 at the end of its
input; errors of single requests are reported in their responses only.

Request:   {"op": NAME, "runId"?: RUN, "id"?: ANY, ...fields}
Responses: {"op": NAME, "id"?: ANY, "ok": true, "result": {...}}
           {"op": NAME, "id"?: ANY, "ok": false, "error": {"code": CODE, "message": TEXT}}

"id", if given, is echoed unchanged. Operations act on the run the last
run.create created, unless they name "runId" (which does not change that
default). Paths are workspace paths ("output/main.md"). Checkpoints are
"cp_000003" or 3. Unknown fields are refused, so a typo cannot pass silently.

Operations (fields with ? are optional):
  run.create  {chat: {kind, stableChatId}, chatRef?, runId?, profile?, inputs?: {path: text}}
              -> {runId, workspaceId}      inputs land under input/
  write       {path, content | contentBase64, expectedHash?}
              -> {path, hash, size, checkpointId?}
  append      {path, content | contentBase64, expectedHash?}   -> as write
  patch       {path, old, new, replaceAll?, expectedHash?}      -> as write
  delete      {path}                        -> {path, hash, checkpointId?}   hash: the removed content
  read        {path, at?, startLine?, endLine?}
              -> {path, content | contentBase64, hash, size, totalLines?, startLine?, endLine?, truncated?}
  list        {path?, depth?, at?}          -> {entries: [{path, kind, size, hash, resource, writable}]}
  checkpoint  {reason?}                     -> {checkpointId, seq}
  rollback    {checkpointId | checkpointSeq, pause?}  -> {runId, root, checkpointId, status}
  diff        {from, to?}                   -> {changes: [{path, op, unified?, binary?, ...}]}  to: default live
  commit      {path?, mode?: replace|append} -> {commitId, checkpointId, mode, message}
  finish      {}                            -> {runId, status, persistChanges, persistVersion, merged}
  events      {afterSeq?, limit?}           -> {events: [...]}   limit: default 100, at most 500
  manifest.set {manifest: {workspaceVersion, artifacts, commitPolicy}} -> {artifacts}
  run.status  {status, reason?}             -> {runId, status}   e.g. failed or cancelled;
                                            a run completes only through finish

write, append, patch, delete, read and list act as the agent's tools: they
see the run through its profile (model scope), so input/ and roots the
profile hides are refused with model-correctable workspace.* codes. A write
that changes the workspace takes a checkpoint when the profile asks for
automatic checkpoints (the default); checkpointId names it. read and list
take "at" to look at a checkpoint instead of the live workspace.

commit has no chat to deliver to: batch's chat sink records the assembled
message in the response ("message": {mes, extra, agent}) and succeeds, so
the host saves it into its chat itself.

Error codes are the store's (workspace.invalid_path, workspace.path_not_writable,
run.not_found, run.invalid_transition, checkpoint.not_found, …) plus:
  batch.invalid_json     the line is not JSON (blank lines too: every line
                         gets its answer)
  batch.unknown_op       op names no operation (op is echoed)
  batch.invalid_request  not an object, op missing or not a string, a field
                         missing, unknown or of the wrong type, no run yet
  batch.line_too_long    the line is longer than 64 MiB (it is skipped)
When op cannot be read, the response's op is "".`

// Batch error codes, in addition to the store's.
const (
	codeInvalidJSON    wserr.Code = "batch.invalid_json"
	codeUnknownOp      wserr.Code = "batch.unknown_op"
	codeInvalidRequest wserr.Code = "batch.invalid_request"
	codeLineTooLong    wserr.Code = "batch.line_too_long"
)

// maxBatchLine bounds one request line.
const maxBatchLine = 64 << 20

type batchOptions struct {
	globals
	in      io.Reader
	maxLine int
}

func newBatchCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "batch",
		Short: "Serve JSON-lines requests on stdin (the way in for hosts)",
		Long:  batchLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			g, err := a.globals(cmd)
			if err != nil {
				return err
			}
			return runBatch(cmd.Context(), batchOptions{globals: g, in: cmd.InOrStdin(), maxLine: maxBatchLine}, args)
		},
	}
}

// batchLine is one line read from the input.
type batchLine struct {
	data    []byte
	tooLong bool
	err     error // a read error other than EOF; ends the batch
}

func runBatch(ctx context.Context, o batchOptions, _ []string) error {
	st, err := openStore(ctx, o.globals, create)
	if err != nil {
		return err
	}
	defer st.Close()
	b := &batchSession{svc: st.Runs}

	// Lines are read on their own goroutine so that an interrupt ends the
	// batch even while it waits for input.
	lines := make(chan batchLine)
	done := make(chan struct{})
	defer close(done)
	go readLines(o.in, o.maxLine, lines, done)
	w := bufio.NewWriter(o.out)
	for {
		var l batchLine
		var ok bool
		select {
		case <-ctx.Done():
			return ctx.Err()
		case l, ok = <-lines:
		}
		if !ok {
			return nil
		}
		if l.err != nil {
			return fmt.Errorf("batch: read: %w", l.err)
		}
		var resp batchResponse
		if l.tooLong {
			resp = errorResponse("", nil, wserr.New(codeLineTooLong, "", "", "line is longer than %d bytes; skipped", o.maxLine))
		} else {
			resp = b.handle(ctx, l.data)
		}
		if err := writeResponse(w, resp); err != nil {
			return fmt.Errorf("batch: write: %w", err)
		}
	}
}

// readLines sends every line of r (without its "\n" or "\r\n") to out and
// closes it at EOF. A line longer than max is drained and sent as tooLong.
// A final line without "\n" is still a line; an input that ends right
// after a "\n" has no extra empty line.
func readLines(r io.Reader, max int, out chan<- batchLine, done <-chan struct{}) {
	defer close(out)
	br := bufio.NewReaderSize(r, 64<<10)
	send := func(l batchLine) bool {
		select {
		case out <- l:
			return true
		case <-done:
			return false
		}
	}
	for {
		var buf []byte
		tooLong, got := false, false
		var err error
		for {
			var frag []byte
			frag, err = br.ReadSlice('\n')
			got = got || len(frag) > 0
			if !tooLong {
				if len(buf)+len(frag) > max+2 { // +2: the line ending
					tooLong, buf = true, nil
				} else {
					buf = append(buf, frag...)
				}
			}
			if errors.Is(err, bufio.ErrBufferFull) {
				continue
			}
			break
		}
		if err != nil && !errors.Is(err, io.EOF) {
			send(batchLine{err: err})
			return
		}
		if !got {
			return // EOF right after the last line
		}
		buf = bytes.TrimSuffix(buf, []byte("\n"))
		buf = bytes.TrimSuffix(buf, []byte("\r"))
		if !send(batchLine{data: buf, tooLong: tooLong}) || err != nil {
			return
		}
	}
}

// batchResponse is one response line.
type batchResponse struct {
	Op     string          `json:"op"`
	ID     json.RawMessage `json:"id,omitempty"`
	OK     bool            `json:"ok"`
	Result any             `json:"result,omitempty"`
	Error  *batchError     `json:"error,omitempty"`
}

type batchError struct {
	Code    wserr.Code `json:"code"`
	Message string     `json:"message"`
}

func errorResponse(op string, id json.RawMessage, err error) batchResponse {
	code := wserr.CodeOf(err)
	msg := wserr.MessageOf(err)
	return batchResponse{Op: op, ID: id, OK: false, Error: &batchError{Code: code, Message: msg}}
}

// writeResponse writes one line and flushes it: the host may be waiting for
// it before it sends the next request.
func writeResponse(w *bufio.Writer, resp batchResponse) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(resp); err != nil {
		// A result that cannot be encoded still gets its line.
		enc.Encode(errorResponse(resp.Op, resp.ID, wserr.Wrap(wserr.Internal, "batch", "", err)))
	}
	return w.Flush()
}
