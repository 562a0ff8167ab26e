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
An interrupt (SIGINT, SIGTERM) ends batch with exit status 130 and
batch.interrupted on standard error; a request in flight that it stops
before its change commits is answered with batch.interrupted instead of
ok, and no further line is read.

Request:   {"op": NAME, "runId"?: RUN, "id"?: ANY, ...fields}
Responses: {"op": NAME, "id"?: ANY, "ok": true, "result": {...}}
           {"op": NAME, "id"?: ANY, "ok": false, "error": {"code": CODE, "message": TEXT}}

"id", if given, is echoed unchanged, unless the line is not JSON or the id
itself is refused. Operations act on the run the last run.create created,
unless they name "runId" (which does not change that default). Paths are
workspace paths ("output/main.md"). Checkpoints are "cp_000003" or 3.

Requests are read strictly, so a typo cannot pass silently: field names are
case-sensitive and unknown ones are refused, at every level; no object may
hold a key twice; values must have the JSON type their field needs (a
null field counts as absent; an entry of inputs or of a list of strings may
not be null); a line must be UTF-8, and a string may not escape a lone
UTF-16 surrogate ("\ud800": a character beyond U+FFFF is escaped as a
pair, "\ud83d\ude00"); values nest at most 64 levels deep. The error
message names the field ("chat.kind").

Operations (fields with ? are optional):
  run.create  {chat: {kind, stableChatId}, chatRef?, runId?, profile?, inputs?: {path: text}}
              -> {runId, workspaceId}      inputs land under input/
      chat         the host's chat: two non-empty strings. Every run of
                   one chat shares its workspace (workspaceId) and persist/.
      chatRef      any JSON value by which the host finds the chat, e.g.
                   {"characterId": "keeper", "fileName": "Keeper.jsonl"};
                   default {}. Unlike chat it may change from run to run
                   (a renamed chat file): the run keeps its own (wsctl
                   show prints it), the chat the latest.
      profile      what the agent (write, read, list, …) may see and do:
                   {id?, visibleRoots?, writableRoots?, autoCheckpoint?,
                    maxRunBytes?, maxCheckpoints?}
        id             a name for the profile; default "default"
        visibleRoots   top-level directories the agent may read, e.g.
                       ["output", "scratch"]; default output, scratch,
                       plan, summaries, persist (add "input" to show input/)
        writableRoots  those of visibleRoots it may write; default all of
                       them but input, which is never writable
        autoCheckpoint true or false: a checkpoint after each change; default true
        maxRunBytes    an integer: the most bytes the live workspace may
                       hold; a write that would cross it is refused; 0 (the
                       default): no cap
        maxCheckpoints an integer: the most checkpoints the run keeps; a
                       checkpoint past it deletes the oldest, recorded by a
                       checkpoints_pruned event, and those read as
                       checkpoint.not_found; a checkpoint a commit was made
                       from is never deleted, even if that keeps the run
                       above the cap; 0 (the default): no cap
  write       {path, content | contentBase64, expectedHash?}
              -> {path, hash, size, checkpointId?}
              expectedHash: the file's hash as last read (64 hex digits; not
              the zero hash): the write fails with workspace.write_stale_file
              if the file changed since
  append      {path, content | contentBase64, expectedHash?}   -> as write
  patch       {path, old, new, replaceAll?, expectedHash?}      -> as write
  delete      {path}                        -> {path, hash, checkpointId?}   hash: the removed content
  read        {path, at?, startLine?, endLine?}
              -> {path, content | contentBase64, hash, size, totalLines?, startLine?, endLine?, truncated?}
  list        {path?, depth?, at?}          -> {entries: [{path, kind, size, hash, resource, writable}]}
              path: default the root. depth: how many levels below path
              to list, an integer; default 1, the direct entries (0 is 1
              too); 2 adds their children, and so on
  checkpoint  {reason?}                     -> {checkpointId, seq}
  rollback    {checkpointId | checkpointSeq, pause?}  -> {runId, root, checkpointId, status}
  diff        {from, to?}                   -> {changes: [{path, op, unified?, binary?, ...}]}  to: default live
              unified: the text wsctl diff prints, with git's headers
              ("--- /dev/null" for an added file, "+++ /dev/null" for a deleted one)
  commit      {path?, mode?: replace|append} -> {commitId, checkpointId, mode, message}
  finish      {}                            -> {runId, status, persistChanges, persistVersion, merged}
  events      {afterSeq?, limit?}           -> {events: [...]}   limit: default 100, at most 500
  manifest.set {manifest}                   -> {artifacts}
      manifest     {workspaceVersion: 1, artifacts: [ARTIFACT, …], commitPolicy?}
        ARTIFACT     {id, path, kind?, target, required?, assemblyOrder?}
                     target: "message_body", "combined_markdown", "hidden"
                     or {"message_extra": KEY}; assemblyOrder: an integer
        commitPolicy {defaultTarget?: "message_body", combineTemplate?, storeArtifactsInExtra?}
                     combineTemplate: text where {{id}} stands for that
                     artifact's content
                   a manifest that is invalid, or has a field unknown or
                   of the wrong type, is refused with manifest.invalid
  run.status  {status, reason?}             -> {runId, status}   e.g. failed or cancelled;
                                            a run completes only through finish

write, append, patch, delete, read and list act as the agent's tools: they
see the run through its profile (model scope), so input/ and roots the
profile hides are refused with model-correctable workspace.* codes. So is
commit's path: a file the model cannot see, or one under input/, is
refused, and a missing one is workspace.file_not_found. A write
that changes the workspace takes a checkpoint when the profile asks for
automatic checkpoints (the default); checkpointId names it. read and list
take "at" to look at a checkpoint instead of the live workspace.

commit has no chat to deliver to: batch's chat sink records the assembled
message in the response ("message": {mes, extra, agent}) and succeeds, so
the host saves it into its chat itself.

Error codes are the store's (workspace.invalid_path, workspace.path_not_writable,
run.not_found, run.invalid_transition, checkpoint.not_found,
manifest.invalid, …) plus:
  batch.invalid_json     the line is not JSON, or not UTF-8 (blank lines
                         too: every line gets its answer)
  batch.unknown_op       op names no operation (op is echoed)
  batch.invalid_request  not an object, op missing or not a string, a field
                         missing, unknown (names are case-sensitive), given
                         twice or of the wrong type, a lone surrogate
                         escape, nested over 64 levels, no run yet
  batch.line_too_long    the line is longer than 64 MiB (it is skipped)
  batch.interrupted      an interrupt stopped the request (see above)
When op cannot be read, or op itself is refused, the response's op is "".`

// Batch error codes, in addition to the store's.
const (
	codeInvalidJSON    wserr.Code = "batch.invalid_json"
	codeUnknownOp      wserr.Code = "batch.unknown_op"
	codeInvalidRequest wserr.Code = "batch.invalid_request"
	codeLineTooLong    wserr.Code = "batch.line_too_long"
	codeInterrupted    wserr.Code = "batch.interrupted"
)

// errInterrupted is the error of a batch, or of the request in flight,
// that an interrupt (SIGINT, SIGTERM) ended.
func errInterrupted(what string) error {
	return wserr.New(codeInterrupted, "batch", "", "interrupted: %s", what)
}

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
	b := &batchSession{svc: st.Runs, journal: st.Journal}

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
			return errInterrupted("no more requests are read")
		case l, ok = <-lines:
		}
		if !ok {
			return nil
		}
		if ctx.Err() != nil {
			// Both were ready: the interrupt wins, the line stays unread.
			return errInterrupted("no more requests are read")
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
		if ctx.Err() != nil {
			// Checked before the next line: once input has ended, the
			// select below could take the closed channel over ctx.Done
			// and end the batch as if nothing had interrupted it.
			return errInterrupted("no more requests are read")
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
