package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/internal/storetest"

	"github.com/wsstore/wsstore/protocol"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// resp is a decoded response line.
type resp struct {
	Op     string          `json:"op"`
	ID     json.RawMessage `json:"id"`
	OK     bool            `json:"ok"`
	Result map[string]any  `json:"result"`
	Error  *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func (r resp) code() string {
	if r.Error == nil {
		return ""
	}
	return r.Error.Code
}

// batch sends input to wsctl batch and decodes the response lines,
// requiring exit status 0.
func (c *cli) batch(input string) []resp {
	c.t.Helper()
	out, errOut, code := c.run(input, "batch")
	require.Equal(c.t, 0, code, errOut)
	return decodeResponses(c.t, out)
}

func decodeResponses(t *testing.T, out string) []resp {
	t.Helper()
	var rs []resp
	for line := range strings.Lines(out) {
		var r resp
		require.NoError(t, json.Unmarshal([]byte(line), &r), "every response is one JSON line: %q", line)
		rs = append(rs, r)
	}
	return rs
}

func TestBatchSession(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	lines := []string{
		`{"op":"run.create","id":1,"chat":{"kind":"character","stableChatId":"s1"},"runId":"b1","inputs":{"prompt_snapshot.json":"{}"}}`,
		`{"op":"write","path":"output/main.md","content":"Hello\n"}`,
		`{"op":"append","path":"output/main.md","content":"World\n"}`,
		`{"op":"patch","path":"output/main.md","old":"World","new":"there"}`,
		`{"op":"write","path":"scratch/raw.bin","contentBase64":"` + base64.StdEncoding.EncodeToString([]byte{0, 1, 2}) + `"}`,
		`{"op":"read","path":"output/main.md"}`,
		`{"op":"read","path":"output/main.md","startLine":2,"endLine":2}`,
		`{"op":"read","path":"scratch/raw.bin"}`,
		`{"op":"read","path":"output/main.md","at":"cp_000002"}`,
		`{"op":"list","path":"","depth":2}`,
		`{"op":"checkpoint","reason":"host mark"}`,
		`{"op":"delete","path":"scratch/raw.bin"}`,
		`{"op":"rollback","checkpointId":"cp_000006"}`,
		`{"op":"list","path":"scratch"}`,
		`{"op":"diff","from":1}`,
		`{"op":"diff","from":"cp_000002","to":"cp_000003"}`,
		`{"op":"commit"}`,
		`{"op":"finish"}`,
		`{"op":"events","afterSeq":1,"limit":3}`,
		`{"op":"events","runId":"b1","afterSeq":100}`,
	}
	rs := c.batch(strings.Join(lines, "\n") + "\n")
	require.Len(t, rs, len(lines), "one response per request")
	for i, r := range rs {
		require.True(t, r.OK, "request %d %s: %+v", i, lines[i], r.Error)
		assert.Equal(t, strings.Split(strings.Split(lines[i], `"op":"`)[1], `"`)[0], r.Op)
	}
	assert.JSONEq(t, `1`, string(rs[0].ID), "id is echoed")
	assert.Nil(t, rs[1].ID)
	assert.Equal(t, map[string]any{"runId": "b1", "workspaceId": runs.ChatWorkspaceID(runs.ChatKey{Kind: "character", StableChatID: "s1"})}, rs[0].Result)

	w := rs[1].Result
	assert.Equal(t, "output/main.md", w["path"])
	assert.EqualValues(t, 6, w["size"])
	assert.Regexp(t, `^[0-9a-f]{64}$`, w["hash"])
	assert.Equal(t, "cp_000002", w["checkpointId"], "each write takes a checkpoint")
	assert.EqualValues(t, 12, rs[2].Result["size"], "append")
	assert.Equal(t, "cp_000004", rs[3].Result["checkpointId"], "patch")

	assert.Equal(t, "Hello\nthere\n", rs[5].Result["content"])
	assert.Equal(t, rs[3].Result["hash"], rs[5].Result["hash"])
	assert.EqualValues(t, 2, rs[5].Result["totalLines"])
	assert.Equal(t, "there\n", rs[6].Result["content"])
	assert.Equal(t, true, rs[6].Result["truncated"])
	assert.Equal(t, "AAEC", rs[7].Result["contentBase64"])
	assert.NotContains(t, rs[7].Result, "content")
	assert.Equal(t, "Hello\n", rs[8].Result["content"], "read at a checkpoint")

	var paths []string
	for _, e := range rs[9].Result["entries"].([]any) {
		paths = append(paths, e.(map[string]any)["path"].(string))
	}
	assert.Equal(t, []string{"output", "output/main.md", "persist", "plan", "scratch", "scratch/raw.bin", "summaries"}, paths,
		"the model's view: its roots, empty ones too; no input/")

	assert.Equal(t, map[string]any{"checkpointId": "cp_000006", "seq": float64(6)}, rs[10].Result)
	assert.Equal(t, "scratch/raw.bin", rs[11].Result["path"])
	assert.NotContains(t, rs[11].Result, "size")
	assert.Equal(t, "cp_000006", rs[12].Result["checkpointId"])
	assert.Equal(t, "b1", rs[12].Result["runId"])
	assert.Len(t, rs[13].Result["entries"], 1, "the rollback restored scratch/raw.bin")

	changes := rs[14].Result["changes"].([]any)
	require.Len(t, changes, 2)
	assert.Equal(t, "output/main.md", changes[0].(map[string]any)["path"])
	assert.Equal(t, "added", changes[0].(map[string]any)["op"])
	assert.Contains(t, changes[0].(map[string]any)["unified"], "+Hello")
	mod := rs[15].Result["changes"].([]any)[0].(map[string]any)
	assert.Equal(t, "modified", mod["op"])

	commit := rs[16].Result
	assert.Equal(t, "commit_b1_0001", commit["commitId"])
	assert.Equal(t, "cp_000008", commit["checkpointId"])
	assert.Equal(t, "Hello\nthere\n", commit["message"].(map[string]any)["mes"], "the message is delivered in the response")

	assert.Equal(t, "completed", rs[17].Result["status"])
	assert.Equal(t, []any{}, rs[17].Result["persistChanges"])

	evs := rs[18].Result["events"].([]any)
	require.Len(t, evs, 3)
	assert.EqualValues(t, 2, evs[0].(map[string]any)["seq"])
	assert.Equal(t, []any{}, rs[19].Result["events"])

	// Everything acknowledged is in the store.
	assert.Equal(t, "Hello\nthere\n", c.ok("cat", "b1", "output/main.md"))
	assert.Equal(t, "{}", c.ok("cat", "b1", "input/prompt_snapshot.json"))
}

// TestBatchMalformedLines sends every kind of bad line; each gets exactly
// one error response, in order, and the batch goes on to serve the good
// requests around them.
func TestBatchMalformedLines(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	big := strings.Repeat("x", 1<<20)
	garbage := make([]byte, 1<<20)
	for i := range garbage {
		garbage[i] = byte(i*7 + 3)
		if garbage[i] == '\n' {
			garbage[i] = 0
		}
	}
	cases := []struct {
		line string
		op   string
		code string
	}{
		{`{"op":"write","path":"output/a.md","content":"x"}`, "write", "batch.invalid_request"}, // no run yet
		{`{"op":"run.create","chat":{"kind":"character","stableChatId":"s"}}`, "run.create", ""},
		{`{"op":"write",`, "", "batch.invalid_json"},
		{`not json at all`, "", "batch.invalid_json"},
		{``, "", "batch.invalid_json"},
		{"   \t", "", "batch.invalid_json"},
		{`[1,2]`, "", "batch.invalid_request"},
		{`"write"`, "", "batch.invalid_request"},
		{`null`, "", "batch.invalid_request"},
		{`{}`, "", "batch.invalid_request"},
		{`{"op":42}`, "", "batch.invalid_request"},
		{`{"op":null}`, "", "batch.invalid_request"},
		{`{"op":"explode"}`, "explode", "batch.unknown_op"},
		{`{"op":"write"}`, "write", "batch.invalid_request"},
		{`{"op":"write","path":"output/a.md"}`, "write", "batch.invalid_request"},
		{`{"op":"write","path":"output/a.md","content":"a","contentBase64":"YQ=="}`, "write", "batch.invalid_request"},
		{`{"op":"write","path":"output/a.md","contentBase64":"%%%"}`, "write", "batch.invalid_request"},
		{`{"op":"write","path":42,"content":"x"}`, "write", "batch.invalid_request"},
		{`{"op":"write","path":"output/a.md","content":["x"]}`, "write", "batch.invalid_request"},
		{`{"op":"write","path":"output/a.md","contnet":"x"}`, "write", "batch.invalid_request"},
		{`{"op":"patch","path":"output/a.md","old":"x"}`, "patch", "batch.invalid_request"},
		{`{"op":"read","path":"output/a.md","startLine":"one"}`, "read", "batch.invalid_request"},
		{`{"op":"list","depth":1.5}`, "list", "batch.invalid_request"},
		{`{"op":"rollback"}`, "rollback", "batch.invalid_request"},
		{`{"op":"rollback","checkpointId":"cp_000001","checkpointSeq":1}`, "rollback", "batch.invalid_request"},
		{`{"op":"rollback","checkpointId":"yesterday"}`, "rollback", "batch.invalid_request"},
		{`{"op":"diff"}`, "diff", "batch.invalid_request"},
		{`{"op":"run.create"}`, "run.create", "batch.invalid_request"},
		{`{"op":"write","path":"input/prompt.json","content":"x"}`, "write", "workspace.path_not_visible"},
		{`{"op":"read","path":"input/persist_snapshot.json"}`, "read", "workspace.path_not_visible"},
		{`{"op":"write","path":"../secrets.json","content":"x"}`, "write", "workspace.invalid_path"},
		{`{"op":"write","path":"output/../../chat.jsonl","content":"x"}`, "write", "workspace.invalid_path"},
		{`{"op":"write","path":"/etc/passwd","content":"x"}`, "write", "workspace.invalid_path"},
		{`{"op":"write","path":"C:\\Users\\me","content":"x"}`, "write", "workspace.invalid_path"},
		{`{"op":"write","path":"scratch/\u0000bad","content":"x"}`, "write", "workspace.invalid_path"},
		{`{"op":"write","path":"","content":"x"}`, "write", "workspace.invalid_path"},
		{`{"op":"write","path":"main.md","content":"x"}`, "write", "workspace.path_not_visible"},
		{`{"op":"read","path":"output/missing.md"}`, "read", "workspace.file_not_found"},
		{`{"op":"patch","path":"output/a.md","old":"a","new":"b"}`, "patch", "workspace.file_not_found"},
		{`{"op":"read","path":"output/a.md","at":99}`, "read", "checkpoint.not_found"},
		{`{"op":"write","runId":"nope","path":"output/a.md","content":"x"}`, "write", "run.not_found"},
		{string(garbage), "", "batch.invalid_json"},
		{"\xff\xfe{\"op\":\"write\"}", "", "batch.invalid_json"},
		{`{"op":"write","path":"output/big.md","content":"` + big + `"}`, "write", ""}, // a 1 MiB line
		{`{"op":"write","path":"output/a.md","content":"fine"}`, "write", ""},
		{`{"op":"patch","path":"output/a.md","old":"x","new":"y"}`, "patch", "workspace.patch_old_string_not_found"},
		{`{"op":"commit","path":"output/nope.md"}`, "commit", "workspace.file_not_found"},
		{`{"op":"commit","path":"input/persist_snapshot.json"}`, "commit", "workspace.path_not_visible"},
		{`{"op":"commit","mode":"sideways"}`, "commit", "workspace.invalid_argument"},
		{`{"op":"events","limit":100000}`, "events", "batch.invalid_request"},
		{`{"op":"finish"}`, "finish", ""},
		{`{"op":"write","path":"output/a.md","content":"late"}`, "write", "run.invalid_transition"},
		{`{"op":"finish"}`, "finish", "run.invalid_transition"},
	}
	var in strings.Builder
	for _, tc := range cases {
		in.WriteString(tc.line)
		in.WriteString("\n")
	}
	rs := c.batch(in.String())
	require.Len(t, rs, len(cases), "exactly one response per line")
	for i, tc := range cases {
		r := rs[i]
		line := tc.line
		if len(line) > 80 {
			line = line[:80] + "…"
		}
		assert.Equal(t, tc.op, r.Op, "line %d %q", i, line)
		assert.Equal(t, tc.code, r.code(), "line %d %q: %+v", i, line, r.Error)
		assert.Equal(t, tc.code == "", r.OK, "line %d", i)
		if r.Error != nil {
			assert.NotEmpty(t, r.Error.Message, "line %d", i)
		}
	}
	assert.Equal(t, "fine", c.ok("cat", rs[1].Result["runId"].(string), "output/a.md"))
}

func TestBatchLineEndings(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	create := `{"op":"run.create","chat":{"kind":"k","stableChatId":"s"},"runId":"r"}`
	// CRLF, a blank line in the middle, and a last line without "\n".
	rs := c.batch(create + "\r\n\n" + `{"op":"write","path":"output/a","content":"x"}`)
	require.Len(t, rs, 3)
	assert.True(t, rs[0].OK)
	assert.Equal(t, "batch.invalid_json", rs[1].code(), "a blank line gets its answer too")
	assert.True(t, rs[2].OK)

	assert.Empty(t, c.batch(""), "no input, no responses")
	assert.Len(t, c.batch("\n"), 1, "one blank line, one response")
}

func TestBatchLineTooLong(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	g := globals{storeDir: c.store, now: time.Now}
	var out bytes.Buffer
	g.out = &out
	in := `{"op":"run.create","chat":{"kind":"k","stableChatId":"s"},"runId":"r"}` + "\n" +
		`{"op":"write","path":"output/a","content":"` + strings.Repeat("y", 5000) + `"}` + "\n" +
		`{"op":"write","path":"output/a","content":"short"}` + "\n"
	require.NoError(t, runBatch(context.Background(), batchOptions{globals: g, in: strings.NewReader(in), maxLine: 1024}, nil))
	rs := decodeResponses(t, out.String())
	require.Len(t, rs, 3)
	assert.Equal(t, "batch.line_too_long", rs[1].code())
	assert.True(t, rs[2].OK)
}

// TestBatchAnswersEachLineBeforeTheNext plays a host that waits for each
// answer before it sends the next request, over pipes: a batch that
// buffered its output, or read ahead before answering, would deadlock
// here. An ok answer means the change is committed: a second store handle
// sees it at once.
func TestBatchAnswersEachLineBeforeTheNext(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b := startBatch(t, ctx, c.app(), c.store, io.Discard)
	ask := b.ask
	r := ask(`{"op":"run.create","chat":{"kind":"k","stableChatId":"s"},"runId":"p1"}`)
	require.True(t, r.OK, "%+v", r.Error)
	st := c.open()
	for i, content := range []string{"first\n", "second\n", "third\n"} {
		r := ask(`{"op":"write","path":"output/a.md","content":` + quote(content) + `}`)
		require.True(t, r.OK, "%+v", r.Error)
		res, err := st.Runs.Workspace("p1", runs.HostScope).Read(context.Background(), vfs.MustPath("output/a.md"), vfs.ReadOptions{})
		require.NoError(t, err)
		assert.Equal(t, content, string(res.Content), "write %d is committed when it is acknowledged", i)
	}
	r = ask(`{"op":"bogus"}`)
	assert.Equal(t, "batch.unknown_op", r.code())
	r = ask(`{"op":"read","path":"output/a.md"}`)
	assert.Equal(t, "third\n", r.Result["content"])
	require.NoError(t, b.in.Close())
	_, err := b.answers.ReadString('\n')
	assert.ErrorIs(t, err, io.EOF, "no answer without a request")
	assert.Equal(t, 0, <-b.done)
}

// TestBatchInterrupted ends the batch when its context ends, even while it
// waits for input: exit status 130 and batch.interrupted on stderr.
func TestBatchInterrupted(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	ctx, cancel := context.WithCancel(context.Background())
	inR, inW := io.Pipe()
	defer inW.Close()
	outR, outW := io.Pipe()
	var errOut storetest.Buffer
	done := make(chan int, 1)
	go func() {
		done <- execute(ctx, c.app(), []string{"--store", c.store, "batch"}, inR, outW, &errOut)
		outW.Close()
	}()
	_, err := io.WriteString(inW, `{"op":"run.create","chat":{"kind":"k","stableChatId":"s"}}`+"\n")
	require.NoError(t, err)
	answer, err := bufio.NewReader(outR).ReadString('\n')
	require.NoError(t, err)
	assert.Contains(t, answer, `"ok":true`)
	cancel() // while the batch waits for the next line
	assert.Equal(t, 130, <-done)
	assert.Equal(t, "wsctl: batch: batch.interrupted: interrupted: no more requests are read\n", errOut.String())
}

// TestBatchInterruptedInFlight interrupts a write while it runs: its
// answer says so with batch.interrupted, not store.internal, the write is
// not committed, and the batch ends with exit status 130.
func TestBatchInterruptedInFlight(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var interrupt atomic.Bool
	a := c.app()
	a.now = func() time.Time {
		if interrupt.Load() {
			cancel() // the store reads the clock inside the write's transaction
		}
		return time.Now()
	}
	var errOut storetest.Buffer
	b := startBatch(t, ctx, a, c.store, &errOut)
	defer b.in.Close()
	ask := b.ask
	r := ask(`{"op":"run.create","chat":{"kind":"k","stableChatId":"s"},"runId":"r"}`)
	require.True(t, r.OK, "%+v", r.Error)
	interrupt.Store(true)
	r = ask(`{"op":"write","id":9,"path":"output/a.md","content":"x"}`)
	assert.Equal(t, "write", r.Op)
	assert.JSONEq(t, `9`, string(r.ID))
	assert.Equal(t, "batch.interrupted", r.code(), "%+v", r.Error)
	assert.Equal(t, 130, <-b.done)
	assert.Contains(t, errOut.String(), "batch.interrupted")
	_, err := c.open().Runs.Workspace("r", runs.HostScope).Read(context.Background(), vfs.MustPath("output/a.md"), vfs.ReadOptions{})
	assert.True(t, wserr.Is(err, wserr.FileNotFound), "the interrupted write is not committed: %v", err)
}

// TestBatchInterruptedAtEndOfInput interrupts the last request of an
// input that has ended: the batch must still end with exit status 130 and
// say so, not take the end of input as a normal end (both are ready at
// once, so this runs many times).
func TestBatchInterruptedAtEndOfInput(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.batch(`{"op":"run.create","chat":{"kind":"k","stableChatId":"s"},"runId":"r"}` + "\n")
	for i := range 30 {
		ctx, cancel := context.WithCancel(context.Background())
		var interrupt atomic.Bool
		a := c.app()
		a.now = func() time.Time {
			if interrupt.Load() {
				cancel()
			}
			return time.Now()
		}
		interrupt.Store(true)
		var out, errOut bytes.Buffer
		code := execute(ctx, a, []string{"--store", c.store, "batch"},
			strings.NewReader(`{"op":"write","runId":"r","path":"output/a.md","content":"x"}`+"\n"), &out, &errOut)
		cancel()
		assert.Contains(t, out.String(), "batch.interrupted", "run %d", i)
		require.Equal(t, 130, code, "run %d: stderr %q", i, errOut.String())
		assert.Contains(t, errOut.String(), "batch.interrupted")
	}
}

// liveBatch is a wsctl batch running over pipes, as a host drives it.
type liveBatch struct {
	t       *testing.T
	in      *io.PipeWriter
	answers *bufio.Reader
	done    chan int // the exit status, once batch ends
}

// startBatch runs wsctl --store store batch with app a until ctx ends or
// its input is closed; stderr goes to errOut.
func startBatch(t *testing.T, ctx context.Context, a *app, store string, errOut io.Writer) *liveBatch {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	b := &liveBatch{t: t, in: inW, answers: bufio.NewReader(outR), done: make(chan int, 1)}
	go func() {
		code := execute(ctx, a, []string{"--store", store, "batch"}, inR, outW, errOut)
		outW.Close()
		b.done <- code
	}()
	return b
}

// ask sends one request line and returns its answer.
func (b *liveBatch) ask(line string) resp {
	b.t.Helper()
	_, err := io.WriteString(b.in, line+"\n")
	require.NoError(b.t, err)
	got, err := b.answers.ReadString('\n')
	require.NoError(b.t, err)
	var r resp
	require.NoError(b.t, json.Unmarshal([]byte(got), &r))
	return r
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestBatchStrictRequests sends requests that encoding/json alone would
// read leniently (changed bytes, case-folded or repeated fields) or
// explain in Go's terms. Each is refused with a message that names the
// field in JSON's terms, and none changes the workspace.
func TestBatchStrictRequests(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	setup := []string{
		`{"op":"run.create","chat":{"kind":"k","stableChatId":"s"},"runId":"r"}`,
		`{"op":"write","path":"output/a.md","content":"orig"}`,
	}
	cases := []struct {
		name string
		line string
		op   string
		code string
		msg  string // the message contains it
		id   string // the id echoed, "" for none
	}{
		{"ErrInvalidUTF8InContent", "{\"op\":\"write\",\"path\":\"output/a.md\",\"content\":\"\xff\"}", "", "batch.invalid_json", "UTF-8", ""},
		{"ErrInvalidUTF8InPath", "{\"op\":\"write\",\"path\":\"output/a\xc3.md\",\"content\":\"x\"}", "", "batch.invalid_json", "UTF-8", ""},
		{"ErrInvalidUTF8InID", "{\"op\":\"delete\",\"id\":\"\xfe\xff\",\"path\":\"output/a.md\"}", "", "batch.invalid_json", "UTF-8", ""},
		{"ErrLoneHighSurrogate", `{"op":"write","path":"output/a.md","content":"\ud800"}`, "write", "batch.invalid_request", `field "content" holds \ud800, a lone UTF-16 surrogate`, ""},
		{"ErrLoneLowSurrogate", `{"op":"write","path":"output/a.md","content":"x\uDC00y"}`, "write", "batch.invalid_request", `\uDC00`, ""},
		{"ErrHighSurrogateBeforeNonSurrogate", `{"op":"write","path":"output/a.md","content":"\ud800\u0041"}`, "write", "batch.invalid_request", `\ud800`, ""},
		{"ErrReversedSurrogates", `{"op":"write","path":"output/a.md","content":"\udc00\ud800"}`, "write", "batch.invalid_request", `\udc00`, ""},
		{"ErrSurrogateInPath", `{"op":"write","path":"output/\ud800a.md","content":"x"}`, "write", "batch.invalid_request", `field "path"`, ""},
		{"ErrSurrogateInNestedValue", `{"op":"run.create","chat":{"kind":"k","stableChatId":"\udfff"}}`, "run.create", "batch.invalid_request", `field "chat.stableChatId"`, ""},
		{"ErrSurrogateInFieldName", `{"op":"write","path":"output/a.md","content":"x","\ud800":1}`, "write", "batch.invalid_request", "a field name", ""},
		{"ErrSurrogateInID", `{"op":"write","id":"\ud800","path":"output/a.md","content":"x"}`, "write", "batch.invalid_request", `field "id"`, ""},
		{"ErrSurrogateInOp", `{"op":"write\ud800","path":"output/a.md","content":"x"}`, "", "batch.invalid_request", `field "op"`, ""},
		{"OKSurrogatePair", `{"op":"write","id":7,"path":"output/b.md","content":"\ud83d\ude00"}`, "write", "", "", "7"},
		{"OKEscapedBackslash", `{"op":"write","id":"\\ud800","path":"output/c.md","content":"\\ud800\\\\\udbff\udfff"}`, "write", "", "", `"\\ud800"`},
		{"ErrDuplicateOp", `{"op":"write","op":"delete","path":"output/a.md","content":"x"}`, "", "batch.invalid_request", `field "op" appears more than once`, ""},
		{"ErrDuplicateOpUnknownLast", `{"op":"delete","op":"explode","path":"output/a.md"}`, "", "batch.invalid_request", `field "op" appears more than once`, ""},
		{"ErrDuplicatePath", `{"op":"delete","id":1,"path":"output/b.md","path":"output/a.md"}`, "delete", "batch.invalid_request", `field "path" appears more than once`, "1"},
		{"ErrDuplicateContent", `{"op":"write","path":"output/a.md","content":"x","content":"y"}`, "write", "batch.invalid_request", `field "content"`, ""},
		{"ErrDuplicateNested", `{"op":"run.create","chat":{"kind":"k","kind":"j","stableChatId":"s"}}`, "run.create", "batch.invalid_request", `field "chat.kind" appears more than once`, ""},
		{"ErrDuplicateInChatRef", `{"op":"run.create","chat":{"kind":"k","stableChatId":"t"},"chatRef":{"file":"a","file":"b"}}`, "run.create", "batch.invalid_request", `field "chatRef.file"`, ""},
		{"ErrDuplicateInputs", `{"op":"run.create","chat":{"kind":"k","stableChatId":"t"},"inputs":{"a.md":"x","a.md":"y"}}`, "run.create", "batch.invalid_request", `field "inputs.a.md"`, ""},
		{"ErrDuplicateInID", `{"op":"write","id":{"n":1,"n":2},"path":"output/a.md","content":"x"}`, "write", "batch.invalid_request", `field "id.n"`, ""},
		{"ErrDuplicateID", `{"op":"write","id":1,"id":2,"path":"output/a.md","content":"x"}`, "write", "batch.invalid_request", `field "id"`, ""},
		{"ErrZeroExpectedHash", `{"op":"write","path":"output/a.md","content":"x","expectedHash":"` + strings.Repeat("0", 64) + `"}`, "write", "workspace.invalid_argument", `field "expectedHash" is the zero hash`, ""},
		{"ErrMalformedExpectedHash", `{"op":"write","path":"output/a.md","content":"x","expectedHash":"zz"}`, "write", "workspace.invalid_argument", `field "expectedHash": hash "zz" must be 64 hex digits`, ""},
		{"ErrChatKindMissing", `{"op":"run.create","chat":{"stableChatId":"t"}}`, "run.create", "batch.invalid_request", `missing "chat.kind"`, ""},
		{"ErrChatIDEmpty", `{"op":"run.create","chat":{"kind":"k","stableChatId":""}}`, "run.create", "batch.invalid_request", `missing "chat.stableChatId"`, ""},
		{"ErrCaseFoldedPath", `{"op":"delete","id":2,"Path":"output/a.md"}`, "delete", "batch.invalid_request", `unknown field "Path": field names are case-sensitive, this one is "path"`, "2"},
		{"ErrUpperCasePath", `{"op":"delete","PATH":"output/a.md"}`, "delete", "batch.invalid_request", `unknown field "PATH"`, ""},
		{"ErrUpperCaseContent", `{"op":"write","path":"output/a.md","CONTENT":"x"}`, "write", "batch.invalid_request", `unknown field "CONTENT"`, ""},
		{"ErrUpperCaseID", `{"op":"write","ID":3,"path":"output/a.md","content":"x"}`, "write", "batch.invalid_request", `unknown field "ID"`, ""},
		{"ErrCaseFoldedRunID", `{"op":"write","runid":"r","path":"output/a.md","content":"x"}`, "write", "batch.invalid_request", `unknown field "runid"`, ""},
		{"ErrCaseFoldedNested", `{"op":"run.create","chat":{"Kind":"k","stableChatId":"t"}}`, "run.create", "batch.invalid_request", `unknown field "chat.Kind"`, ""},
		{"ErrCaseFoldedProfile", `{"op":"run.create","chat":{"kind":"k","stableChatId":"t"},"profile":{"visibleroots":["output"]}}`, "run.create", "batch.invalid_request", `unknown field "profile.visibleroots"`, ""},
		{"ErrUnknownManifestField", `{"op":"manifest.set","manifest":{"workspaceVersion":1,"artifacts":[{"id":"main","Path":"output/a.md","target":"message_body"}]}}`, "manifest.set", "manifest.invalid", `unknown field "manifest.artifacts[0].Path"`, ""},
		{"ErrDuplicateInManifestTarget", `{"op":"manifest.set","manifest":{"workspaceVersion":1,"artifacts":[{"id":"main","path":"output/a.md","target":{"message_extra":"a","message_extra":"b"}}]}}`, "manifest.set", "batch.invalid_request", `field "manifest.artifacts[0].target.message_extra"`, ""},
		{"ErrRunIDNotString", `{"op":"write","runId":5,"path":"output/a.md","content":"x"}`, "write", "batch.invalid_request", `field "runId" must be a string, not a number`, ""},
		{"ErrPathNotString", `{"op":"write","path":42,"content":"x"}`, "write", "batch.invalid_request", `field "path" must be a string, not a number`, ""},
		{"ErrDepthNotInteger", `{"op":"list","depth":1.5}`, "list", "batch.invalid_request", `field "depth" must be an integer, not 1.5`, ""},
		{"ErrDepthOutOfRange", `{"op":"list","depth":1e400}`, "list", "batch.invalid_request", `field "depth": 1e400 is out of range: it takes an integer in -9223372036854775808..9223372036854775807`, ""},
		{"ErrStartLineString", `{"op":"read","path":"output/a.md","startLine":"one"}`, "read", "batch.invalid_request", `field "startLine" must be an integer, not a string`, ""},
		{"ErrReplaceAllString", `{"op":"patch","path":"output/a.md","old":"o","new":"n","replaceAll":"yes"}`, "patch", "batch.invalid_request", `field "replaceAll" must be true or false, not a string`, ""},
		{"ErrChatNotObject", `{"op":"run.create","chat":["k","s"]}`, "run.create", "batch.invalid_request", `field "chat" must be an object, not an array`, ""},
		{"ErrRootsNotStrings", `{"op":"run.create","chat":{"kind":"k","stableChatId":"t"},"profile":{"visibleRoots":[1]}}`, "run.create", "batch.invalid_request", `field "profile.visibleRoots[0]" must be a string, not a number`, ""},
		{"ErrInputNotString", `{"op":"run.create","chat":{"kind":"k","stableChatId":"t"},"inputs":{"a.md":{}}}`, "run.create", "batch.invalid_request", `field "inputs.a.md" must be a string, not an object`, ""},
		{"ErrManifestNotObject", `{"op":"manifest.set","manifest":"x"}`, "manifest.set", "manifest.invalid", `field "manifest" must be an object, not a string`, ""},
		{"ErrArtifactsNotArray", `{"op":"manifest.set","manifest":{"workspaceVersion":1,"artifacts":{}}}`, "manifest.set", "manifest.invalid", `field "manifest.artifacts" must be an array, not an object`, ""},
	}
	lines := append([]string(nil), setup...)
	for _, tc := range cases {
		lines = append(lines, tc.line)
	}
	lines = append(lines, `{"op":"read","path":"output/a.md"}`, `{"op":"read","path":"output/c.md"}`)
	rs := c.batch(strings.Join(lines, "\n") + "\n")
	require.Len(t, rs, len(lines), "one response per line")
	for i := range setup {
		require.True(t, rs[i].OK, "%+v", rs[i].Error)
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := rs[len(setup)+i]
			assert.Equal(t, tc.op, r.Op)
			assert.Equal(t, tc.code, r.code(), "%+v", r.Error)
			if tc.id == "" {
				assert.Nil(t, r.ID, "no id echoed")
			} else {
				assert.JSONEq(t, tc.id, string(r.ID))
			}
			if r.Error == nil {
				return
			}
			assert.Contains(t, r.Error.Message, tc.msg)
			for _, goTerm := range []string{"Go ", "json:", "base.", "runs.", "[]string", "int64", "float64"} {
				assert.NotContains(t, r.Error.Message, goTerm, "the message speaks JSON")
			}
		})
	}
	last := rs[len(rs)-2:]
	assert.Equal(t, "orig", last[0].Result["content"], "no refused request changed anything")
	assert.Equal(t, `\ud800\\`+"\U0010FFFF", last[1].Result["content"], "escaped backslashes are not escapes")
	assert.Equal(t, "\U0001F600", c.ok("cat", "r", "output/b.md"))
}

// TestBatchDiffHeaders: batch's diff gives the same unified text as wsctl
// diff, text or --json, with git's /dev/null headers for added and deleted
// files.
func TestBatchDiffHeaders(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	setup := []string{
		`{"op":"run.create","chat":{"kind":"k","stableChatId":"s"},"runId":"r"}`, // cp_000001
		`{"op":"write","path":"output/a.md","content":"one\n"}`,                  // cp_000002
		`{"op":"write","path":"output/a.md","content":"two\n"}`,                  // cp_000003
		`{"op":"delete","path":"output/a.md"}`,                                   // cp_000004
	}
	cases := []struct {
		name, from, to string
		op             string
		header         string
	}{
		{"Added", "1", "2", "added", "--- /dev/null\n+++ b/output/a.md\n"},
		{"Modified", "2", "3", "modified", "--- a/output/a.md\n+++ b/output/a.md\n"},
		{"Deleted", "3", "4", "deleted", "--- a/output/a.md\n+++ /dev/null\n"},
	}
	lines := append([]string(nil), setup...)
	for _, tc := range cases {
		lines = append(lines, `{"op":"diff","from":`+tc.from+`,"to":`+tc.to+`}`)
	}
	rs := c.batch(strings.Join(lines, "\n") + "\n")
	require.Len(t, rs, len(lines))
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := rs[len(setup)+i]
			require.True(t, r.OK, "%+v", r.Error)
			changes := r.Result["changes"].([]any)
			require.Len(t, changes, 1)
			change := changes[0].(map[string]any)
			assert.Equal(t, tc.op, change["op"])
			unified := change["unified"].(string)
			assert.True(t, strings.HasPrefix(unified, tc.header), "batch: %q", unified)

			assert.Equal(t, c.ok("diff", "r", tc.from, tc.to), unified, "wsctl diff prints the same text")
			var cli []map[string]any
			c.jsonOut(&cli, "diff", "r", tc.from, tc.to)
			require.Len(t, cli, 1)
			assert.Equal(t, unified, cli[0]["unified"], "wsctl diff --json gives the same text")
		})
	}
}

// TestBatchHelpGivesEveryField: batch --help is the protocol's reference,
// which names every operation and every field (the protocol's tests check
// it against the request types).
func TestBatchHelpGivesEveryField(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	help := c.ok("batch", "--help")
	assert.Contains(t, help, protocol.Help())
	for _, want := range []string{
		"\n  run.create ", "\n  write ", "\n  manifest.set ", "\n  run.status ",
		"chatRef      any JSON value", // its shape
		"depth: how many levels below path", "default 1, the direct entries",
		"visibleRoots   top-level directories", "writableRoots  those of visibleRoots",
		"autoCheckpoint true or false", "maxRunBytes    an integer",
		"batch.interrupted", "exit status 130",
	} {
		assert.Contains(t, help, want)
	}
}

// TestBatchLineLimitIsExact: a line of exactly the limit is read, one
// byte more is too long, whatever its ending.
func TestBatchLineLimitIsExact(t *testing.T) {
	t.Parallel()
	const max = 100
	for _, ending := range []string{"\n", "\r\n", ""} {
		in := strings.Repeat("a", max) + "\n" + strings.Repeat("b", max+1) + ending
		out := make(chan batchLine)
		go readLines(strings.NewReader(in), max, out, nil)
		var got []batchLine
		for l := range out {
			got = append(got, l)
		}
		require.Len(t, got, 2, "ending %q", ending)
		assert.False(t, got[0].tooLong, "a line of the limit, ending %q", ending)
		assert.Len(t, got[0].data, max)
		assert.True(t, got[1].tooLong, "a line one byte past the limit, ending %q", ending)
		assert.Empty(t, got[1].data)
	}
}

// TestBatchLineLimitAcrossReads: a line longer than the reader's 64 KiB
// buffer, its "\r" at the end of one read and its "\n" at the start of
// the next, is whole and within a limit of its length.
func TestBatchLineLimitAcrossReads(t *testing.T) {
	t.Parallel()
	const max = 64<<10 - 1
	in := strings.Repeat("a", max) + "\r\n" + strings.Repeat("b", 3*max) + "\r\n" + "c\r\n"
	out := make(chan batchLine)
	go readLines(strings.NewReader(in), max, out, nil)
	var got []batchLine
	for l := range out {
		got = append(got, l)
	}
	require.Len(t, got, 3)
	assert.False(t, got[0].tooLong)
	assert.Equal(t, strings.Repeat("a", max), string(got[0].data))
	assert.True(t, got[1].tooLong)
	assert.Equal(t, "c", string(got[2].data))
}

// TestCommitsListPages: commits.list through wsctl batch answers a page of
// commits with their messages and whether more remain, and afterSeq goes
// on from the last; wsctl show --json lists every commit with its message
// (read a page at a time) as valid JSON, and show's text names each.
func TestCommitsListPages(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	lines := []string{`{"op":"run.create","chat":{"kind":"character","stableChatId":"s1"},"runId":"p1"}`}
	for i := range 3 {
		lines = append(lines, fmt.Sprintf(`{"op":"write","path":"output/main.md","content":"draft <%d> & more\n"}`, i), `{"op":"commit"}`)
	}
	lines = append(lines,
		`{"op":"commits.list","limit":2}`,
		`{"op":"commits.list","afterSeq":2}`,
		`{"op":"commits.list","limit":501}`,
	)
	rs := c.batch(strings.Join(lines, "\n") + "\n")
	page := func(r resp) (bodies []string, more bool) {
		t.Helper()
		require.True(t, r.OK, "%+v", r.Error)
		for _, c := range r.Result["commits"].([]any) {
			bodies = append(bodies, c.(map[string]any)["message"].(map[string]any)["mes"].(string))
		}
		return bodies, r.Result["more"].(bool)
	}
	bodies, more := page(rs[7])
	assert.Equal(t, []string{"draft <0> & more\n", "draft <1> & more\n"}, bodies)
	assert.True(t, more)
	bodies, more = page(rs[8])
	assert.Equal(t, []string{"draft <2> & more\n"}, bodies)
	assert.False(t, more)
	assert.Equal(t, "batch.invalid_request", rs[9].code(), "a bound out of range is the host's mistake")

	var d runDetails
	c.jsonOut(&d, "show", "p1")
	require.Len(t, d.Commits, 3)
	for i, cm := range d.Commits {
		assert.Equal(t, int64(i+1), cm.Seq)
		assert.Equal(t, fmt.Sprintf("draft <%d> & more\n", i), cm.Message.Body)
	}
	assert.Equal(t, "p1", d.Run.ID, "the fields around the commits are there")
	assert.Equal(t, 1, len(d.Manifest.Artifacts))
	out := c.ok("show", "p1")
	assert.Regexp(t, `(?m)^commits\s+commit_p1_0001 commit replace completed from cp_\d+$`, out)
	assert.Equal(t, 3, strings.Count(out, "commit_p1_"))

	// A run without commits.
	c.batch(`{"op":"run.create","chat":{"kind":"character","stableChatId":"s2"},"runId":"p2"}` + "\n")
	out = c.ok("show", "p2", "--json")
	assert.Contains(t, out, `"commits": []`)
	assert.True(t, json.Valid([]byte(out)))
}
