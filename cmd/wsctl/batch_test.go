package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
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
	assert.Equal(t, []string{"output", "output/main.md", "scratch", "scratch/raw.bin"}, paths, "the model's view: no input/")

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
		{`{"op":"rollback","checkpointId":"yesterday"}`, "rollback", "workspace.invalid_argument"},
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
		{`{"op":"commit","path":"output/nope.md"}`, "commit", "manifest.missing_required_artifact"},
		{`{"op":"commit","mode":"sideways"}`, "commit", "workspace.invalid_argument"},
		{`{"op":"events","limit":100000}`, "events", "workspace.invalid_argument"},
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
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan int, 1)
	go func() {
		code := execute(ctx, c.app(), []string{"--store", c.store, "batch"}, inR, outW, io.Discard)
		outW.Close()
		done <- code
	}()
	answers := bufio.NewReader(outR)
	ask := func(line string) resp {
		t.Helper()
		_, err := io.WriteString(inW, line+"\n")
		require.NoError(t, err)
		got, err := answers.ReadString('\n')
		require.NoError(t, err)
		var r resp
		require.NoError(t, json.Unmarshal([]byte(got), &r))
		return r
	}
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
	require.NoError(t, inW.Close())
	_, err := answers.ReadString('\n')
	assert.ErrorIs(t, err, io.EOF, "no answer without a request")
	assert.Equal(t, 0, <-done)
}

// TestBatchInterrupted ends the batch when its context ends, even while it
// waits for input.
func TestBatchInterrupted(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	ctx, cancel := context.WithCancel(context.Background())
	inR, inW := io.Pipe()
	defer inW.Close()
	var out syncBuffer
	done := make(chan int, 1)
	go func() { done <- execute(ctx, c.app(), []string{"--store", c.store, "batch"}, inR, &out, io.Discard) }()
	_, err := io.WriteString(inW, `{"op":"run.create","chat":{"kind":"k","stableChatId":"s"}}`+"\n")
	require.NoError(t, err)
	cancel()
	assert.NotEqual(t, 0, <-done)
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
