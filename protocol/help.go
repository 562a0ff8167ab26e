package protocol

import "strings"

// Help is the protocol's reference for hosts, as wsctl batch --help
// prints it: how lines are read and answered, every operation with its
// fields (from the op table), and the error codes.
func Help() string {
	var b strings.Builder
	b.WriteString(helpIntro)
	for _, o := range ops {
		b.WriteString("\n")
		b.WriteString(o.help)
	}
	b.WriteString("\n")
	b.WriteString(helpOutro)
	b.WriteString("\n\n")
	b.WriteString(readOnlyHelp())
	return b.String()
}

// readOnlyHelp lists the operations that change nothing in the store,
// wrapped to the width of the rest of the help.
func readOnlyHelp() string {
	var b strings.Builder
	line := "Read-only operations (the rest may change the store; a read-only token of\nwsctl serve may send only these):"
	b.WriteString(line)
	width := 0
	first := true
	for _, o := range ops {
		if o.access != reads {
			continue
		}
		word := o.name
		if !first {
			word = ", " + word
		}
		if width+len(word) > 72 {
			b.WriteString(",\n ")
			word, width = " "+o.name, 1
		} else if first {
			b.WriteString("\n ")
			word, width = " "+o.name, 1
		}
		b.WriteString(word)
		width += len(word)
		first = false
	}
	b.WriteString(".")
	return b.String()
}

const helpIntro = `batch is the way in for hosts written in other languages: it reads JSON
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
ok, and no further line is read. A response that cannot be written (the
host closed its end of standard output) ends batch with exit status 2,
printing nothing more, after closing the store; the request it answered
stays committed (a commit is recorded failed, below), no further line is
read.

Request:   {"op": NAME, "runId"?: RUN, "id"?: ANY, ...fields}
Responses: {"op": NAME, "id"?: ANY, "ok": true, "result": {...}}
           {"op": NAME, "id"?: ANY, "ok": false, "error": {"code": CODE, "message": TEXT}, "partial"?: {...}}

"message" is for people, at most 16 KiB: one quoting a longer value the
request held (a run id, an op of megabytes) is cut, ending in "…".

"partial" is on the error of gc, prune, reclaim or actor.gc when the op
failed after some of its steps had committed (each is committed on its
own): what they did, in the shape of the op's result. Without it, the
failed op changed nothing.

"id", if given, is echoed unchanged, unless the line is not JSON, is
longer than the longest line batch reads, or the id itself is refused.
Operations act on the run the last run.create created, unless they name
"runId" (which does not change that default; an empty "runId" is refused
with batch.invalid_request, never read as absent). An op that acts on no
run (export, import, prune, chat.delete, policy.set, policy.get,
runs.list, chats.list, chat.show, deletions, stats, gc, fsck, du, reclaim
and the actor ops) refuses a "runId" with batch.invalid_request, changing
nothing. Paths are workspace paths ("output/main.md"). Checkpoints are
"cp_000003" or 3.

Requests are read strictly, so a typo cannot pass silently: field names are
case-sensitive and unknown ones are refused, at every level; no object may
hold a key twice; values must have the JSON type their field needs (a
null field counts as absent; an entry of inputs or of a list of strings may
not be null); a line must be UTF-8, and a string may not escape a lone
UTF-16 surrogate ("\ud800": a character beyond U+FFFF is escaped as a
pair, "\ud83d\ude00"); values nest at most 64 levels deep. The error
message names the field ("chat.kind").

Operations (fields with ? are optional):`

const helpOutro = `
write, append, patch, delete, read and list act as the agent's tools: they
see the run through its profile (model scope), so input/ and roots the
profile hides are refused with model-correctable workspace.* codes. So is
commit's path: a file the model cannot see, or one under input/, is
refused, and a missing one is workspace.file_not_found. A write
that changes the workspace takes a checkpoint when the profile asks for
automatic checkpoints (the default); checkpointId names it, and is absent
when the change left the workspace as it was (the same bytes written
again, an empty append): that is journaled, with no checkpoint. read and list
take "at" to look at a checkpoint instead of the live workspace.

commit has no chat to deliver to: its response delivers the assembled
message ("message": {mes, extra, agent}) and the host saves it into its
chat itself. The commit is recorded completed only once that response line
is written: if it cannot be (the host's end is closed), the commit is
recorded failed and batch ends with exit status 2 (1 for a write that
failed otherwise, the host still there); a batch killed between
the two leaves it pending, for commit.resolve. commit.rollback likewise.

Error codes are the store's (workspace.invalid_path, workspace.path_not_writable,
run.not_found, run.invalid_transition, checkpoint.not_found,
manifest.invalid, …) plus:
  batch.invalid_json     the line is not JSON, or not UTF-8 (blank lines
                         too: every line gets its answer), or nests over
                         10,000 levels, which encoding/json does not read
  batch.unknown_op       op names no operation (op is echoed)
  batch.invalid_request  not an object, op missing or not a string, a field
                         missing, unknown (names are case-sensitive), given
                         twice or of the wrong type, a lone surrogate
                         escape, nested over 64 levels (up to 10,000),
                         no run yet
  batch.line_too_long    the line is longer than 64 MiB, its ending not
                         counted (it is skipped)
  batch.interrupted      an interrupt stopped the request (see above)
When op cannot be read, or op itself is refused, the response's op is "".`
